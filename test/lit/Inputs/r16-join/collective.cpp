// Input of R16-join.test: an episode loop that all-reduces its own return
// every episode: per-rank episodes would make that collective's count
// differ by rank, so the rollouts stay as they are.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <cstdio>

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  torch::manual_seed(42);
  torch::nn::Linear policy(4, 2);
  torch::optim::Adam optimizer(policy->parameters());
  for (int episode = 0; episode < 10; ++episode) {
    auto probs = torch::softmax(policy->forward(torch::rand({1, 4})), -1);
    auto action = torch::multinomial(probs.squeeze(0), 1);
    auto loss = -torch::log(probs[0][action.item<int64_t>()]);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    double mean_return = ddp::all_reduce(-loss.item<double>(), ddp::ReduceOp::kMean);
    std::printf("%d %f\n", episode, mean_return);
  }
  return 0;
}
