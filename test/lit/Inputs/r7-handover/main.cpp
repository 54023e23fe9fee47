// Input of R7-stream-handover.test: std::cout handed to a logger, a
// progress printer and a helper whose bodies are in log.cpp.
#include "log.h"

#include <torch/torch.h>

#include <iostream>
#include <sstream>

// Defined here: R7 guards its statement itself.
void print_here(std::ostream &out, double loss) { out << loss << '\n'; }

int main() {
  Logger log(std::cout);
  Progress progress(&std::cout);
  std::ostringstream kept;
  Logger quiet(kept);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD opt(model->parameters(), 0.1);
  auto x = torch::randn({8, 4}), y = torch::randn({8, 1});
  double last = 0;
  for (int e = 0; e < 3; ++e) {
    opt.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    log.epoch(e, last);
    quiet.epoch(e, last);
    progress.step(e);
  }
  print_summary(std::cout, last);
  print_here(std::cout, last);
  return kept.str().empty() ? 1 : 0;
}
