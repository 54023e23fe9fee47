#include <torch/torch.h>

torch::Device gpu(torch::kCUDA);

#include "helper.h"

int main() { return place(torch::ones({1})).defined() ? 0 : 1; }
