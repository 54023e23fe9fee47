// Input of uneven-steps.test: loops whose steps may differ by rank and
// that make a collective of the program's own (or leave by goto): ddp::join()
// cannot make them right, and the error item names why.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <cstdio>

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

void report_progress(int t) {
  ddp::barrier();
  (void)t;
}

// A collective inside the episode's own loop, through a helper.
void with_barrier(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  for (int episode = 0; episode < 10; ++episode) {
    env.reset();
    for (int t = 0; t < 50; ++t) {
      const int64_t action = act(policy, torch::ones({1, 3}));
      update(policy, optimizer, env.reward());
      report_progress(t);
      if (env.step(action))
        break;
    }
  }
}

// ddp::all_reduce in the loop itself.
void with_all_reduce(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  for (int t = 0; t < 50; ++t) {
    const int64_t action = act(policy, torch::ones({1, 3}));
    update(policy, optimizer, env.reward());
    double total = ddp::all_reduce(static_cast<double>(env.reward()));
    (void)total;
    if (env.step(action))
      break;
  }
}

// A goto out of the loop would skip the join.
void with_goto(torch::nn::Linear &policy, torch::optim::Adam &optimizer) {
  Corridor env;
  for (int t = 0; t < 50; ++t) {
    const int64_t action = act(policy, torch::ones({1, 3}));
    update(policy, optimizer, env.reward());
    if (env.step(action))
      goto finished;
    if (act(policy, torch::ones({1, 3})) == 7)
      break;
  }
finished:
  return;
}

// The epoch loop's exit on a count of this rank's data: R11 all-reduces
// the epoch's sum inside that loop.
void with_metric(torch::nn::Linear &model, torch::optim::SGD &optimizer) {
  auto loader = torch::data::make_data_loader(
      Points().map(torch::data::transforms::Stack<>()), 4);
  auto probe = torch::ones({1, 3});
  for (int epoch = 0; epoch < 5; ++epoch) {
    double running = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      running += loss.item<double>();
    }
    std::printf("epoch %d: %f\n", epoch, running);
    if (model->forward(probe).argmax(1).item<int64_t>() == 0)
      break;
  }
}

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  torch::nn::Linear policy(3, 2);
  torch::optim::Adam optimizer(policy->parameters());
  with_barrier(policy, optimizer);
  with_all_reduce(policy, optimizer);
  with_goto(policy, optimizer);
  torch::nn::Linear model(3, 2);
  torch::optim::SGD sgd(model->parameters(), 0.01);
  with_metric(model, sgd);
  return 0;
}
