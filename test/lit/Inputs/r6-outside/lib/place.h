// A library header outside the project root: ddpify never edits it.
#pragma once
#include <torch/torch.h>

template <typename M> void place(M &model, torch::Device device) {
  model->to(device);
}
