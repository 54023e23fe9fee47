// Input of R4.test: loaders already sharded, left alone.
#include <ddp/ddp.h>
#include <torch/torch.h>

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  auto dataset = torch::data::datasets::MNIST("./data").map(
      torch::data::transforms::Stack<>());
  auto train_loader = ddp::make_data_loader(dataset, 64);
  auto test_loader =
      ddp::make_eval_data_loader<torch::data::samplers::SequentialSampler>(
          dataset, 1000);
  auto torch_sharded = torch::data::make_data_loader(
      dataset, torch::data::samplers::DistributedSequentialSampler(60000),
      torch::data::DataLoaderOptions(64));
  for (auto &batch : *train_loader)
    batch.data.sum().backward();
  for (auto &batch : *test_loader)
    (void)batch;
  for (auto &batch : *torch_sharded)
    batch.data.sum().backward();
  return 0;
}
