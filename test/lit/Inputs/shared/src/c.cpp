// CPU-only code: nothing to change, no include added.
#include <torch/torch.h>

torch::Tensor on_cpu() { return torch::ones({2}).to(torch::kCPU); }
