#include "data.h"
#include <iostream>

int main() {
  torch::nn::Linear net(4, 1);
  net->to(torch::kCUDA);
  torch::optim::SGD opt(net->parameters(), 0.1);
  Session session(8);
  for (int e = 0; e < 2; ++e)
    std::cout << train_epoch(net, opt, *session.loader) << "\n";
}
