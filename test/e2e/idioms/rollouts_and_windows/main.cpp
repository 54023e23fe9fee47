// Two trainings whose data are no batches to share out: a policy learned
// from its own rollouts in a small simulated corridor (REINFORCE, one update
// per episode, an episode ends early when the agent leaves the corridor),
// then a recurrent model fitted to one long signal over consecutive windows,
// its hidden state carried from each window into the next (truncated
// backpropagation through time).
// Usage: rollouts_and_windows [window]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

struct Policy : torch::nn::Module {
  Policy() {
    hidden = register_module("hidden", torch::nn::Linear(3, 16));
    out = register_module("out", torch::nn::Linear(16, 2));
  }
  torch::Tensor forward(torch::Tensor state) {
    return torch::log_softmax(out(torch::tanh(hidden(state))), -1);
  }
  torch::nn::Linear hidden{nullptr}, out{nullptr};
};

struct Tracker : torch::nn::Module {
  Tracker() {
    cell = register_module("cell", torch::nn::GRUCell(1, 8));
    head = register_module("head", torch::nn::Linear(8, 1));
  }
  torch::nn::GRUCell cell{nullptr};
  torch::nn::Linear head{nullptr};
};

int main(int argc, char **argv) {
  const int64_t window = argc > 1 ? std::atol(argv[1]) : 16;
  torch::manual_seed(3);
  torch::Device device =
      torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto policy = std::make_shared<Policy>();
  policy->to(device);
  torch::optim::Adam policy_optimizer(policy->parameters(),
                                      torch::optim::AdamOptions(0.02));
  const int episodes = 40, horizon = 10;
  double reward_sum = 0;
  int finished = 0;
  for (int episode = 0; episode < episodes; ++episode) {
    std::vector<torch::Tensor> log_probs;
    int position = 0;
    float reward = 0;
    for (int t = 0; t < horizon; ++t) {
      auto state = torch::tensor({position / 3.0f, t / float(horizon), 1.0f})
                       .to(device)
                       .unsqueeze(0);
      auto log_prob = policy->forward(state).squeeze(0);
      const int64_t action =
          torch::multinomial(log_prob.exp(), 1).item<int64_t>();
      log_probs.push_back(log_prob[action]);
      position += action == 1 ? 1 : -1;
      if (position == 3 || position == -3) {
        reward = position == 3 ? 1.0f : -1.0f;
        ++finished;
        break;
      }
    }
    auto loss = -reward * torch::stack(log_probs).sum();
    policy_optimizer.zero_grad();
    loss.backward();
    policy_optimizer.step();
    reward_sum += reward;
  }
  std::printf("policy episodes %d finished %d mean_reward %.6f\n", episodes,
              finished, reward_sum / episodes);

  auto tracker = std::make_shared<Tracker>();
  tracker->to(device);
  torch::optim::SGD tracker_optimizer(tracker->parameters(), 0.05);
  const int64_t length = 320;
  auto signal = torch::sin(torch::linspace(0, 12, length + 1)).to(device);
  auto hidden = torch::zeros({1, 8}, device);
  double window_loss = 0;
  int64_t windows = 0;
  for (int64_t start = 0; start + window < length; start += window) {
    auto inputs = signal.narrow(0, start, window);
    auto targets = signal.narrow(0, start + 1, window);
    std::vector<torch::Tensor> predictions;
    for (int64_t k = 0; k < window; ++k) {
      hidden = tracker->cell(inputs[k].view({1, 1}), hidden);
      predictions.push_back(tracker->head(hidden).view({1}));
    }
    auto loss = torch::mse_loss(torch::cat(predictions), targets);
    tracker_optimizer.zero_grad();
    loss.backward();
    tracker_optimizer.step();
    hidden = hidden.detach();
    window_loss += loss.item<double>();
    ++windows;
  }
  std::printf("tracker windows %lld mean_loss %.6f\n",
              static_cast<long long>(windows), window_loss / windows);
  return EXIT_SUCCESS;
}
