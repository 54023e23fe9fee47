#include "model.h"
#include "helpers.h"
#include "vendor.h"

int main() {
  auto x = to_gpu(torch::rand({2})) + ones_on_gpu() + vendor_to_gpu(torch::rand({2}));
  return x.defined() ? 0 : 1;
}
