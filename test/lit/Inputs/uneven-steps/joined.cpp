// Input of uneven-steps.test: training loops whose number of steps depends
// on each rank's own episodes or data, which R12 makes every rank leave
// through ddp::join(), and a loss threshold it averages as before.
#include <torch/torch.h>

#include <cstdio>
#include <vector>

struct Corridor {
  int position = 0;
  void reset() { position = 0; }
  bool step(int64_t action) {
    position += action == 1 ? 1 : -1;
    return position >= 3 || position <= -3;
  }
  float reward() const { return position > 0 ? 1.0f : -1.0f; }
};

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({3}, static_cast<double>(i)),
            torch::full({2}, static_cast<double>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 16; }
};

int64_t act(torch::nn::Linear &policy, const torch::Tensor &state) {
  return policy->forward(state).argmax(1).item<int64_t>();
}

void update(torch::nn::Linear &policy, torch::optim::Adam &optimizer,
            float reward) {
  auto loss = policy->forward(torch::ones({1, 3})).sum() * reward;
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
}

// Episodes x steps, an update after every environment step, `while (!done)`.
void per_step(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  for (int episode = 0; episode < 10; ++episode) {
    env.reset();
    bool done = false;
    while (!done) {
      const int64_t action = act(policy, torch::ones({1, 3}));
      done = env.step(action);
      update(policy, optimizer, env.reward());
    }
  }
  torch::save(policy, "policy.pt");
}

// The episode ends with a `break` from the inner loop; the loss-based early
// stop in the same loop needs no mean once the loop is joined.
void break_on_done(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  for (int episode = 0; episode < 10; ++episode) {
    env.reset();
    for (int t = 0; t < 50; ++t) {
      const int64_t action = act(policy, torch::ones({1, 3}));
      bool done = env.step(action);
      auto loss = policy->forward(torch::ones({1, 3})).sum();
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (done)
        break;
      if (loss.item<float>() < -100.0f)
        break;
    }
  }
}

// A return from inside the nested loops: every rank joins on that path too.
int return_inside(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  int steps = 0;
  for (int episode = 0; episode < 10; ++episode) {
    env.reset();
    for (int t = 0; t < 50; ++t) {
      const int64_t action = act(policy, torch::ones({1, 3}));
      update(policy, optimizer, env.reward());
      ++steps;
      if (env.step(action))
        return steps;
    }
  }
  return steps;
}

// Supervised: a loss threshold decides on the mean over the ranks, as
// before.
void supervised(torch::nn::Linear &model, torch::optim::SGD &optimizer) {
  auto loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 4);
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      if (loss.item<float>() < 1e-4f)
        break;
    }
  }
}

// An integer count of this rank's batch: the batch loop is joined (R11's
// all-reduce of the epoch's sum follows the join, in the epoch loop).
void supervised_count(torch::nn::Linear &model, torch::optim::SGD &optimizer) {
  auto loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 4);
  for (int epoch = 0; epoch < 5; ++epoch) {
    double running = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      running += loss.item<double>();
      if (model->forward(batch.data).argmax(1).sum().item<int64_t>() == 0)
        break;
    }
    std::printf("epoch %d: %f\n", epoch, running);
  }
}

int main() {
  torch::nn::Linear policy(3, 2);
  torch::optim::Adam optimizer(policy->parameters());
  per_step(policy, optimizer);
  break_on_done(policy, optimizer);
  int steps = return_inside(policy, optimizer);
  torch::nn::Linear model(3, 2);
  torch::optim::SGD sgd(model->parameters(), 0.01);
  supervised(model, sgd);
  supervised_count(model, sgd);
  return steps > 0 ? 0 : 1;
}
