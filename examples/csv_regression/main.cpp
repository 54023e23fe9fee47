// A single-GPU regression on a CSV file: a custom dataset that parses the
// file, a Sequential model built with push_back, a bare batch size for the
// loader, a global options struct holding the device, gradient clipping and
// a frozen input normalisation layer.
//
//   csv_regression FILE.csv [EPOCHS]
//   csv_regression --write-sample FILE.csv   (writes a synthetic data set)

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

struct Options {
  torch::Device device = torch::kCUDA;
  int64_t batch_size = 16;
  double learning_rate = 0.003;
};
Options options;

class CsvDataset : public torch::data::datasets::Dataset<CsvDataset> {
public:
  explicit CsvDataset(const std::string &path) {
    std::ifstream in(path);
    if (!in) {
      throw std::runtime_error("cannot open " + path);
    }
    std::string line;
    std::getline(in, line); // header
    std::vector<float> features;
    std::vector<float> targets;
    int64_t rows = 0;
    while (std::getline(in, line)) {
      std::stringstream fields(line);
      std::string field;
      std::vector<float> values;
      while (std::getline(fields, field, ',')) {
        values.push_back(std::stof(field));
      }
      if (values.size() != 5) {
        throw std::runtime_error(path + ": expected 5 columns in row " +
                                 std::to_string(rows + 2));
      }
      features.insert(features.end(), values.begin(), values.end() - 1);
      targets.push_back(values.back());
      ++rows;
    }
    features_ = torch::tensor(features).view({rows, 4});
    targets_ = torch::tensor(targets).view({rows, 1});
  }

  torch::data::Example<> get(size_t index) override {
    return {features_[index], targets_[index]};
  }

  torch::optional<size_t> size() const override { return features_.size(0); }

private:
  torch::Tensor features_;
  torch::Tensor targets_;
};

void write_sample(const std::string &path) {
  std::ofstream out(path);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  out << "x0,x1,x2,x3,y\n";
  for (int row = 0; row < 400; ++row) {
    float x[4];
    for (float &v : x) {
      v = normal(rng);
    }
    const float y =
        1.5f * x[0] - 2.0f * x[1] + 0.5f * x[2] * x[3] + 0.1f * normal(rng);
    out << x[0] << ',' << x[1] << ',' << x[2] << ',' << x[3] << ',' << y
        << '\n';
  }
}

int main(int argc, char **argv) {
  if (argc > 2 && std::string(argv[1]) == "--write-sample") {
    write_sample(argv[2]);
    return 0;
  }
  if (argc < 2) {
    std::cerr << "usage: csv_regression FILE.csv [EPOCHS]\n";
    return 2;
  }
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 20;
  if (!torch::cuda::is_available()) {
    options.device = torch::kCPU;
  }
  torch::manual_seed(3);

  torch::nn::Sequential model;
  model->push_back(torch::nn::BatchNorm1d(4));
  model->push_back(torch::nn::Linear(4, 32));
  model->push_back(torch::nn::ReLU());
  model->push_back(torch::nn::Linear(32, 1));
  // The normalisation layer only standardises the inputs: its affine
  // parameters stay frozen at their identity values.
  for (auto &parameter : model[0]->parameters()) {
    parameter.set_requires_grad(false);
  }
  model->to(options.device);

  auto data_loader = torch::data::make_data_loader(
      CsvDataset(argv[1]).map(torch::data::transforms::Stack<>()),
      options.batch_size);

  torch::optim::Adam optimizer(
      model->parameters(), torch::optim::AdamOptions(options.learning_rate));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double total = 0;
    int64_t batches = 0;
    for (auto &batch : *data_loader) {
      auto x = batch.data.to(options.device);
      auto y = batch.target.to(options.device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    if (epoch % 5 == 0 || epoch == 1) {
      std::cout << "epoch " << epoch << " mse " << total / batches << '\n';
    }
  }
  torch::save(model, "csv_model.pt");
  std::cout << "saved csv_model.pt\n";
}
