// Agents that learn from experience they draw themselves, and loops that
// only look alike.
#include <torch/torch.h>

#include <random>
#include <vector>

struct Net : torch::nn::Module {
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

// A bandit whose payouts come from the program's generator, by reference.
class Bandit {
public:
  explicit Bandit(std::mt19937 &gen) : gen_(gen) {}
  float pull(int64_t arm) {
    std::normal_distribution<float> payout(arm == 1 ? 1.0f : 0.0f, 1.0f);
    return payout(gen_);
  }

private:
  std::mt19937 &gen_;
};

// A maze that keeps its own generator.
class Maze {
public:
  explicit Maze(unsigned seed) : engine_(seed) {}
  torch::Tensor start() {
    std::uniform_real_distribution<float> cell(0.0f, 1.0f);
    return torch::full({1, 4}, cell(engine_));
  }

private:
  std::mt19937 engine_;
};

void train_policy(std::shared_ptr<Net> policy) {
  torch::optim::SGD optimizer(policy->parameters(), 0.01);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> noise(-0.1f, 0.1f);
  for (int episode = 0; episode < 20; ++episode) {
    auto state = torch::full({1, 4}, noise(gen));
    auto probs = torch::softmax(policy->forward(state), -1);
    auto action = torch::multinomial(probs.squeeze(0), 1);
    auto loss = -torch::log(probs[0][action.item<int64_t>()]);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

void train_bandit(std::shared_ptr<Net> policy) {
  torch::optim::Adam optimizer(policy->parameters());
  std::mt19937 payouts(3);
  Bandit bandit(payouts);
  for (int round = 0; round < 50; ++round) {
    auto logits = policy->forward(torch::ones({1, 4}));
    auto arm = torch::argmax(logits, -1).item<int64_t>();
    auto reward = bandit.pull(arm);
    auto loss = -reward * torch::log_softmax(logits, -1)[0][arm];
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

void explore_maze(std::shared_ptr<Net> policy) {
  torch::optim::Adam optimizer(policy->parameters());
  Maze maze(5);
  for (int run = 0; run < 10; ++run) {
    auto loss = policy->forward(maze.start()).pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

// Draws nothing: the whole signal at every step, R15 shards its rows.
void fit_signal(std::shared_ptr<Net> model) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto x = torch::linspace(0, 1, 40).view({10, 4});
  for (int step = 0; step < 30; ++step) {
    auto loss = model->forward(x).pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

// Noise drawn per batch of a loader: R4 shards the loader, R16 has nothing
// to do.
void train_noisy(std::shared_ptr<Net> model) {
  auto data = torch::data::datasets::TensorDataset(torch::randn({64, 4}))
                  .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = torch::data::make_data_loader(std::move(data), 16);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (auto &batch : *loader) {
    auto noisy = batch.data + 0.1 * torch::randn_like(batch.data);
    auto loss = model->forward(noisy).pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA
                                                   : torch::kCPU);
  auto policy = std::make_shared<Net>();
  policy->to(device);
  train_policy(policy);
  auto bandit_policy = std::make_shared<Net>();
  bandit_policy->to(device);
  train_bandit(bandit_policy);
  auto maze_policy = std::make_shared<Net>();
  maze_policy->to(device);
  explore_maze(maze_policy);
  auto model = std::make_shared<Net>();
  model->to(device);
  fit_signal(model);
  auto denoiser = std::make_shared<Net>();
  denoiser->to(device);
  train_noisy(denoiser);
}
