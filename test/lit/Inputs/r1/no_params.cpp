// Input of R1.test: main() without parameters.
#include <torch/torch.h>

int main() {
  auto x = torch::ones({2});
  return x.size(0) == 2 ? 0 : 1;
}
