// Input of R7-work.test: printed values that do work every process must do.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

struct Meter {
  double total = 0;
  int64_t count = 0;
  double average() const { return count ? total / count : 0; }
  double mean_value() const { return average(); }
};
std::ostream &operator<<(std::ostream &out, const Meter &meter) {
  return out << meter.total << '/' << meter.count;
}

double evaluate(Net &net, const torch::Tensor &x) {
  return net->forward(x).mean().item<double>();
}
std::string describe(Net &net) { return "net " + std::to_string(net->fc->weight.numel()); }

template <typename Model>
void report(Model &model, const torch::Tensor &x, const torch::Tensor &loss) {
  std::cout << "template loss " << loss.template item<float>() << '\n';
  std::cout << "template output " << model->forward(x).sum().template item<float>()
            << '\n';
}

int main() {
  Net net;
  auto x = torch::ones({2, 4});
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  Meter meter;
  int step = 0, saved = 0;
  bool verbose = true;
  double evaluate_value = 0; // the name is taken: the hoist picks another
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::cout << "epoch " << epoch << " eval " << evaluate(net, x) << '\n';
    std::cout << "again " << evaluate(net, x) << '\n';
    std::cout << "step " << ++step << " saved " << saved++ << '\n';
    std::cout << "output " << net->forward(x).sum().item<float>() << " call "
              << net(x).sum().item<float>() << '\n';
    std::cout << "meter " << meter << " average " << meter.average() << '\n';
    std::cout << "mean " << meter.mean_value() << '\n';
    std::printf("%s %.3f\n", describe(net).c_str(), evaluate(net,
                                                             x));
    std::cout << "maybe " << (verbose ? evaluate(net, x) : 0.0) << '\n';
    std::cout << "noise " << torch::randn({1}).item<float>() << '\n';
    if (epoch == 1)
      std::cout << "last " << evaluate(net, x) << '\n';
    else
      std::cout << "not last\n";
    auto print = [&] { return evaluate(net, x); };
    std::cout << "lambda " << print() << '\n';
    std::cout << "plain " << x.sum().item<float>() << " " << step << '\n';
  }
  report(net, x, x.sum());
  (void)evaluate_value;
  return 0;
}
