// Input of lint-ddp-divergent-exit-rollouts.test: episodes of a policy that
// end early. No BatchNorm in this program.
#include <torch/torch.h>

#include <vector>

struct Corridor {
  int position = 0;
  bool step(int64_t action) {
    position += action == 1 ? 1 : -1;
    return position == 3 || position == -3;
  }
};

void sync_helper(torch::Tensor loss) { loss.backward(); }

int main() {
  torch::nn::Linear policy(3, 2);
  torch::optim::Adam optimizer(policy->parameters());
  for (int episode = 0; episode < 20; ++episode) {
    Corridor env;
    std::vector<torch::Tensor> log_probs;
    // Not flagged: the rollout runs the policy and the environment only.
    for (int t = 0; t < 10; ++t) {
      auto log_prob = torch::log_softmax(policy(torch::ones({1, 3})), -1)[0];
      const int64_t action = torch::multinomial(log_prob.exp(), 1).item<int64_t>();
      log_probs.push_back(log_prob[action]);
      if (env.step(action) || log_prob[action].item<float>() < -3.0f)
        break;
    }
    auto loss = -torch::stack(log_probs).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    // Flagged: the episode loop trains.
    if (loss.item<float>() > 8.0f)
      break;
  }
  // Flagged: this loop's own body trains, through a helper.
  for (int t = 0; t < 10; ++t) {
    auto out = policy(torch::ones({1, 3})).sum();
    sync_helper(out);
    if (out.item<int64_t>() > 4)
      break;
  }
  return 0;
}
