// Input of R8.test: checkpoints written with torch::save.
#include <torch/torch.h>

#include <iostream>

#define SAVE(m, path) torch::save(m, path)

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::nn::Linear fc{nullptr};
};

void checkpoint(const std::shared_ptr<Net> &model, int epoch) {
  if (epoch % 2 == 0)
    torch::save(model, "model-" + std::to_string(epoch) + ".pt");
  else
    std::cerr << "skipped\n";
}

int main(int argc, char **argv) {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor weights = torch::ones({2, 2});
  torch::save(model, "model.pt");
  torch::save(optimizer, "optimizer.pt");
  torch::save(weights, "weights.pt");
  torch::save(model->parameters(), "parameters.pt");
  torch::serialize::OutputArchive archive;
  model->save(archive);
  archive.save_to("archive.pt");
  checkpoint(model, 2);
  SAVE(model, "macro.pt");
  // Negatives: loading, a function named save that is not torch::save.
  torch::load(model, "model.pt");
  auto save = [](int) {};
  save(1);
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
