#include <torch/torch.h>

#include "b.h"

torch::Tensor g(torch::Tensor t) { return helper_b() ? t.cuda() : t; }
