// Input of R6-gathered-parameters.test: one optimizer over the parameters
// of several models, gathered into one vector.
#include <torch/torch.h>

#include <vector>

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::nn::Linear enc(4, 2), dec(2, 4), head(4, 1), probe(4, 1);
  torch::nn::Sequential extra(torch::nn::Linear(4, 4));
  enc->to(device);
  dec->to(device);
  head->to(device);
  extra->to(device);
  probe->to(device);

  // A local copy of one model's parameters appended with insert.
  std::vector<torch::Tensor> params = enc->parameters();
  auto dp = dec->parameters();
  params.insert(params.end(), dp.begin(), dp.end());
  // One by one from a range-for, and from named_parameters().
  for (auto &p : head->parameters())
    params.push_back(p);
  for (const auto &item : extra->named_parameters())
    params.emplace_back(item.value());
  torch::optim::Adam opt(params, 1e-3);

  // Gathered but handed to no optimizer: not trained, not wrapped.
  std::vector<torch::Tensor> watched;
  for (auto &p : probe->parameters())
    watched.push_back(p);

  auto x = torch::randn({8, 4}, device);
  for (int epoch = 0; epoch < 2; ++epoch) {
    opt.zero_grad();
    auto loss = torch::mse_loss(dec(enc(extra->forward(x))), x) +
                head(x).pow(2).mean();
    loss.backward();
    opt.step();
  }
  return watched.size() == 2 ? 0 : 1;
}
