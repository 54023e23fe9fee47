// Input of R1.test: main marks its parameters unused; once ddp::init reads
// them, the casts are dead and go (a cast sharing its line stays).
#include <torch/torch.h>

int main(int argc, char **argv) {
  (void)argc;
  static_cast<void>(argv);
  (void)argc; // twice, with a comment: stays
  return torch::ones({1}).size(0) - 1;
}
