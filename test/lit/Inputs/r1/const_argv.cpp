// Input of R1.test: argv is const char*[]: ddp::init(int&, char**) cannot
// take it, so ddp::init() is called without arguments.
#include <torch/torch.h>

int main(int argc, const char *argv[]) {
  if (argc > 1)
    return argv[1][0] == 'x';
  return 0;
}
