#include <torch/torch.h>

torch::Tensor h(torch::Tensor t) { return torch::project_ops() ? t.cuda() : t; }
