#pragma once
#include <torch/torch.h>

#include "model.h"

// Writes checkpoint-<epoch>-model.pt and checkpoint-<epoch>-optimizer.pt.
void save_checkpoint(const Classifier &model,
                     const torch::optim::Optimizer &optimizer, int epoch);
