// Input of R1.test: unnamed parameters cannot be passed.
#include <torch/torch.h>

int main(int, char **) {
  return 0;
}
