// Already distributed (ddp::init): a .cuda() and an unsharded loader are
// hazards now; the print is still what migrate rewrites.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <iostream>

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  auto data = torch::randn({64, 4});
  auto dataset = torch::data::datasets::TensorDataset({data, data})
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader(std::move(dataset), 8);
  for (auto &batch : *loader) {
    auto x = batch.data.cuda();
    std::cout << x.sum().item<float>() << std::endl;
  }
}
