// Input of R1.test: argv is const char*[]: ddp::init() takes no argument,
// so the program's casts to void still say something and stay.
#include <torch/torch.h>

int main(int argc, const char *argv[]) {
  (void)argc;
  (void)argv;
  return 0;
}
