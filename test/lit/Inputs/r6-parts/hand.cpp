// Input of R6-parts.test: a part of a model wrapped by hand; the model is
// the program's to wrap, so R6 adds no wrapper over the whole.
#include <ddp/ddp.h>
#include <torch/torch.h>

struct TwoImpl : torch::nn::Module {
  TwoImpl()
      : a(register_module("a", torch::nn::Linear(4, 4))),
        b(register_module("b", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return b(a(x)); }
  torch::nn::Linear a, b;
};
TORCH_MODULE(Two);

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  torch::Device device = ddp::device();
  Two two;
  two->to(device);
  ddp::distribute(two->a);
  ddp::distribute(two->b);
  torch::optim::Adam first(two->a->parameters(), 1e-3);
  torch::optim::Adam second(two->b->parameters(), 1e-3);
  torch::Tensor loss = two->forward(torch::ones({2, 4}, device)).sum();
  first.zero_grad();
  second.zero_grad();
  loss.backward();
  first.step();
  second.step();
  return 0;
}
