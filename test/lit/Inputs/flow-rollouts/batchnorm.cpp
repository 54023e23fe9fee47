// Input of lint-ddp-divergent-exit-rollouts.test: the same rollout with a
// BatchNorm layer in the policy: its forward passes take part in
// SyncBatchNorm's collectives once migrated, so the rollout's end counts.
#include <torch/torch.h>

#include <vector>

int main() {
  torch::nn::Sequential policy(torch::nn::Linear(3, 8),
                               torch::nn::BatchNorm1d(8),
                               torch::nn::Linear(8, 2));
  torch::optim::Adam optimizer(policy->parameters());
  for (int episode = 0; episode < 20; ++episode) {
    std::vector<torch::Tensor> log_probs;
    int position = 0;
    for (int t = 0; t < 10; ++t) {
      auto log_prob = torch::log_softmax(policy->forward(torch::ones({2, 3})), -1)[0];
      const int64_t action = torch::multinomial(log_prob.exp(), 1).item<int64_t>();
      log_probs.push_back(log_prob[action]);
      position += action == 1 ? 1 : -1;
      if (position == 3 || log_prob[action].item<float>() < -3.0f)
        break;
    }
    auto loss = -torch::stack(log_probs).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  return 0;
}
