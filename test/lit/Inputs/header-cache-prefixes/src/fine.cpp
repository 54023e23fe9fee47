// Fine-grained LibTorch headers, the same two as guarded.cpp reaches.
#include <torch/nn.h>
#include <torch/optim.h>

torch::Tensor fine(torch::Tensor t) { return t.cuda(); }
