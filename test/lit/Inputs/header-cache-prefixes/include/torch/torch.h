// A stand-in for LibTorch's entry header, small enough to precompile in a
// moment.
#pragma once
#include <torch/nn.h>
#include <torch/optim.h>
