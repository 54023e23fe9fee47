// Input of R8-read-back.test: checkpoints the main process writes and every
// rank reads back.
#include <torch/torch.h>

#include <filesystem>
#include <iostream>
#include <string>

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 1)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

int main(int argc, char **argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // Resume: a file of an earlier run, read in a try.
  try {
    torch::load(model, dir + "/last.pt");
  } catch (const c10::Error &) {
  }
  double best = 1e9;
  for (int epoch = 0; epoch < 3; ++epoch) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::ones({2, 4})).pow(2).mean();
    loss.backward();
    optimizer.step();
    torch::save(model, dir + "/last.pt");
    if (loss.item<double>() < best) {
      best = loss.item<double>();
      torch::save(model, "best.pt");
    }
  }
  const std::string archive_path = "state.pt";
  torch::serialize::OutputArchive out;
  model->save(out);
  out.save_to(archive_path);

  // Read back by every rank: a path in a variable, a literal, an archive,
  // behind a test of the file.
  auto best_model = std::make_shared<Net>();
  torch::load(best_model, "best.pt");
  if (std::filesystem::exists(dir + "/last.pt"))
    torch::load(model, dir + "/last.pt");
  torch::serialize::InputArchive in;
  in.load_from("state.pt");
  best_model->load(in);
  // A file no checkpoint write names, but a write names a path built at run
  // time: it may be that file.
  auto other = std::make_shared<Net>();
  try {
    torch::load(other, "pretrained.pt");
  } catch (const c10::Error &) {
  }
  std::cout << best_model->forward(torch::ones({1, 4})).item<float>() << '\n';
  return 0;
}
