// Input of R1.test: main() whose body declares `argc`: adding a parameter of
// that name would clash, so ddp::init() takes no arguments.
#include <torch/torch.h>

int main() {
  int argc = 3;
  return argc - 3;
}
