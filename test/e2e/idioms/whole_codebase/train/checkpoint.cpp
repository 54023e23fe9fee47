#include "checkpoint.h"

#include <iostream>
#include <string>

void save_checkpoint(const Classifier &model,
                     const torch::optim::Optimizer &optimizer, int epoch) {
  const std::string stem = "checkpoint-" + std::to_string(epoch);
  torch::save(model, stem + "-model.pt");
  torch::save(optimizer, stem + "-optimizer.pt");
  std::cout << "checkpoint " << epoch << " written" << std::endl;
}
