// Input of lint-fix-guards.test: output statements (one block of them, a
// tensor moved with .cuda() inside one, a value computed by a forward pass)
// in a unit that already initialises DDP.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <iostream>

void report(torch::nn::Linear &fc, const torch::Tensor &x, int epoch) {
  std::cout << "epoch " << epoch << '\n';
  std::cout << "input " << x.cuda().sum().item<float>()
            << '\n';
  std::cout << "output " << fc->forward(x).sum().item<float>() << '\n';
}
