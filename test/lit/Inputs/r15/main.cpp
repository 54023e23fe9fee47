// Input of R15.test: training loops fed whole tensors, sharded by rows where
// the loss is a mean or a sum over rows, left whole otherwise.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

namespace F = torch::nn::functional;

struct Classifier : torch::nn::Module {
  Classifier() : fc(register_module("fc", torch::nn::Linear(4, 3))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};

// A loss of the program's own.
torch::Tensor pinball(const torch::Tensor &prediction,
                      const torch::Tensor &target) {
  auto error = target - prediction;
  return torch::max(0.9 * error, -0.1 * error).mean();
}

// mse, a mean, over X and Y; the loss printed after backward().
void regression(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  for (int epoch = 1; epoch <= 50; ++epoch) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    if (epoch % 10 == 0)
      std::cout << "epoch " << epoch << " loss " << loss.item<float>() << '\n';
  }
}

// A module-form cross-entropy (mean by default), the count of correct rows
// and a mean accuracy; an evaluation on a whole test tensor afterwards.
void classification(torch::Tensor features, torch::Tensor labels,
                    torch::Tensor test_features, torch::Tensor test_labels) {
  Classifier model;
  torch::optim::SGD optimizer(model.parameters(), 0.1);
  torch::nn::CrossEntropyLoss criterion;
  int epoch = 0;
  while (epoch < 20) {
    ++epoch;
    auto logits = model.forward(features);
    auto loss = criterion(logits, labels);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    auto correct = logits.argmax(1).eq(labels).sum().item<int64_t>();
    auto accuracy = (logits.argmax(1) == labels).to(torch::kFloat).mean();
    std::printf("%d %.4f %lld/%lld %.4f\n", epoch, loss.item<double>(),
                static_cast<long long>(correct),
                static_cast<long long>(labels.size(0)),
                accuracy.item<double>());
  }
  torch::NoGradGuard no_grad;
  auto test_logits = model.forward(test_features);
  auto test_correct = test_logits.argmax(1).eq(test_labels).sum().item<int64_t>();
  std::printf("test %lld\n", static_cast<long long>(test_correct));
}

// A sum reduction through the functional form, recorded in a local read
// after the loop; a const tensor gets a name of its own.
double summed(const torch::Tensor inputs, torch::Tensor targets) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.001);
  double last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = F::mse_loss(
        model->forward(inputs), targets,
        F::MSELossFuncOptions().reduction(torch::kSum));
    loss.backward();
    optimizer.step();
    last = loss.item<double>();
  }
  return last;
}

// backward() on the loss itself.
void direct(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    torch::l1_loss(model->forward(x), y).backward();
    optimizer.step();
  }
}

// Whole: a loss of the program's own.
void custom_loss(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = pinball(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
}

// Whole: a normaliser computed over the whole batch.
void normalised(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto out = model->forward(x);
    auto loss = torch::mse_loss(out, y, torch::Reduction::Sum) /
                (y - y.mean()).pow(2).sum();
    loss.backward();
    optimizer.step();
  }
}

// Whole: a loss over a reduction across rows; and class weights.
void across_rows(torch::Tensor x, torch::Tensor y, torch::Tensor labels) {
  torch::nn::Linear model(4, 1);
  Classifier classifier;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  torch::optim::SGD classifier_optimizer(classifier.parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x).mean(0), y.mean(0));
    loss.backward();
    optimizer.step();
  }
  torch::nn::CrossEntropyLoss weighted(
      torch::nn::CrossEntropyLossOptions().weight(torch::ones({3})));
  for (int step = 0; step < 10; ++step) {
    classifier_optimizer.zero_grad();
    auto loss = weighted(classifier.forward(x), labels);
    loss.backward();
    classifier_optimizer.step();
  }
}

// Untouched by R15: X re-assigned in the loop; mini-batches of a loader.
void not_full_batches(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    x = x + 0.01 * torch::randn_like(x);
  }
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(x).map(
          torch::data::transforms::Stack<torch::data::TensorExample>()),
      16);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
  }
}

// The loss printed now and then: made global only under the print's
// condition, which is the same on every rank.
void logged_every(torch::Tensor x, torch::Tensor y, int every) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  const int steps = 40;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    if (step % every == 0 || step + 1 == steps) {
      std::printf("step %d loss %.4f\n", step, loss.item<double>());
    }
  }
}

// A condition on the loss itself: the loss is global at every step, and the
// loop's exit, decided on it, needs no mean over the ranks (R12).
void logged_when_low(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 40; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    if (loss.item<double>() < 0.05) {
      std::printf("converged at %d loss %.4f\n", step, loss.item<double>());
      break;
    }
  }
}

// A condition on a count the loop changes: the loss is global at every step.
void logged_by_count(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  int seen = 0;
  for (int step = 0; step < 40; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    if (++seen % 10 == 0)
      std::printf("loss %.4f\n", loss.item<double>());
  }
}

// Left whole: 'x' is read after the loop (R12's non-torch-loader note says
// which tensor, which use and where).
void used_after(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  std::cout << "mean input " << x.mean().item<double>() << '\n';
}

// The training set evaluated again after the loop (a final loss over all its
// rows): the loop's shard has a name of its own, the evaluation its own shard
// and a global figure.
void final_on_training_set(torch::Tensor x, torch::Tensor y) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  torch::NoGradGuard no_grad;
  const double final_mse = torch::mse_loss(model->forward(x), y).item<double>();
  std::printf("final train_mse %.4f\n", final_mse);
}

// Tensors bound by structured bindings.
std::pair<torch::Tensor, torch::Tensor> make_data(int64_t count) {
  auto inputs = torch::randn({count, 4});
  return {inputs, inputs.sum(1, true)};
}

// A by-value binding names a pair of its own: re-bound to its rows in place.
void bound_by_value() {
  auto [x, y] = make_data(101);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
}

// Bound, then placed on the device.
void bound_then_placed(torch::Device device) {
  auto [x, y] = make_data(101);
  x = x.to(device);
  y = y.to(device);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
}

// A const binding cannot be re-assigned: its shard has a name of its own.
void bound_const() {
  const auto [x, y] = make_data(101);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
}

// A binding by reference refers into the caller's pair, which must keep its
// whole tensors: the shard has a name of its own.
void bound_by_reference(std::pair<torch::Tensor, torch::Tensor> &data) {
  auto &[x, y] = data;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
}

// ... but not when the loop also reads the pair it refers into.
void bound_and_held(std::pair<torch::Tensor, torch::Tensor> &data) {
  auto &[x, y] = data;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), data.second);
    loss.backward();
    optimizer.step();
  }
}

int main() {
  torch::manual_seed(0);
  auto x = torch::randn({101, 4}), y = torch::randn({101, 1});
  auto labels = torch::randint(3, {101});
  regression(x, y);
  classification(x, labels, torch::randn({31, 4}), torch::randint(3, {31}));
  std::printf("%.4f\n", summed(x, y));
  direct(x, y);
  custom_loss(x, y);
  normalised(x, y);
  across_rows(x, y, labels);
  not_full_batches(x, y);
  logged_every(x, y, 10);
  logged_when_low(x, y);
  logged_by_count(x, y);
  used_after(x, y);
  final_on_training_set(x, y);
  bound_by_value();
  bound_then_placed(torch::kCPU);
  bound_const();
  auto data = make_data(101);
  bound_by_reference(data);
  bound_and_held(data);
  return 0;
}
