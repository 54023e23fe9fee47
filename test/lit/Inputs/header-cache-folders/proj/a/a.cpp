#include <torch/torch.h>

#include "a.h"

torch::Tensor f(torch::Tensor t) { return helper_a() ? t.cuda() : t; }
