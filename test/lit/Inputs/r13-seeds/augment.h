// Input of R13.test: helpers of another unit.
#pragma once

#include <torch/torch.h>

// Called per batch from main's loop over a sharded loader: each rank's own.
torch::Tensor augment(const torch::Tensor &x);
// Called once by main: every rank the same table.
std::vector<float> noise_table(size_t n);
