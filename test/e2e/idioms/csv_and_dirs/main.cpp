// Logistic regression on two interleaved half moons. Writes an output folder
// with a CSV log of every epoch, a summary file of its own format and the
// trained model.
// Usage: csv_logger [batch_size]
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>

namespace fs = std::filesystem;

struct MoonNet : torch::nn::Module {
  torch::nn::Linear in{nullptr}, out{nullptr};
  MoonNet() {
    in = register_module("in", torch::nn::Linear(2, 16));
    out = register_module("out", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return out(torch::tanh(in(x))); }
};

struct Moons : torch::data::datasets::Dataset<Moons> {
  torch::Tensor points, labels;
  explicit Moons(int64_t n) {
    auto upper = torch::rand({n}) < 0.5;
    auto t = torch::rand({n}) * M_PI;
    auto x = torch::where(upper, torch::cos(t), 1 - torch::cos(t));
    auto y = torch::where(upper, torch::sin(t), 0.5 - torch::sin(t));
    points = torch::stack({x, y}, 1) + 0.15 * torch::randn({n, 2});
    labels = upper.to(torch::kFloat).unsqueeze(1);
  }
  torch::data::Example<> get(size_t i) override {
    return {points[i], labels[i]};
  }
  torch::optional<size_t> size() const override { return points.size(0); }
};

void write_summary(const std::string &path, int epochs, double final_loss,
                   double final_accuracy) {
  std::ofstream out(path);
  out << "# moons summary\n";
  out << "epochs=" << epochs << "\n";
  out << std::fixed << std::setprecision(6) << "final_loss=" << final_loss
      << "\n"
      << "final_accuracy=" << final_accuracy << "\n";
}

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  const int epochs = 4;
  torch::manual_seed(9);
  torch::Device device = torch::cuda::is_available() ? torch::Device("cuda:0")
                                                     : torch::Device("cpu");

  const fs::path out_dir = "runs";
  if (!fs::exists(out_dir))
    fs::create_directory(out_dir);
  std::ofstream csv(out_dir / "train_log.csv");
  csv << "epoch,loss,accuracy\n";

  Moons moons(576);
  const auto n = moons.size().value();
  auto loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
          std::move(moons).map(torch::data::transforms::Stack<>()), batch_size);

  auto model = std::make_shared<MoonNet>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(0.02));

  double loss_avg = 0, accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss_total = 0;
    int64_t correct = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      auto logits = model->forward(x);
      auto loss = torch::binary_cross_entropy_with_logits(logits, y);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_total += loss.item<double>() * x.size(0);
      correct += (logits > 0).to(torch::kFloat).eq(y).sum().item<int64_t>();
    }
    loss_avg = loss_total / n;
    accuracy = static_cast<double>(correct) / n;
    csv << epoch << ',' << std::fixed << std::setprecision(6) << loss_avg << ','
        << accuracy << '\n';
    std::cout << "epoch " << epoch << " train_loss " << std::fixed
              << std::setprecision(6) << loss_avg << " train_correct "
              << correct << '\n';
  }
  csv.close();

  write_summary((out_dir / "summary.txt").string(), epochs, loss_avg, accuracy);
  torch::save(model, (out_dir / "moons.pt").string());
  std::cout << "wrote " << out_dir.string() << '\n';
}
