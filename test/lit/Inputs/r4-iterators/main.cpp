// Input of R4-iterators.test: loaders used through their iterators.
#include <torch/torch.h>

#include <iostream>
#include <iterator>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({2}, static_cast<double>(i)),
            torch::tensor(static_cast<int64_t>(i % 2))};
  }
  torch::optional<size_t> size() const override { return 40; }
};

using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

// The iterator handed to a function: not followed.
template <typename Iterator> void consume(Iterator it) { (void)*it; }

int main() {
  torch::nn::Linear net(2, 2);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  auto stacked = Points().map(torch::data::transforms::Stack<>());

  // Training by iterator in a while loop: even; its loss sum reduced.
  auto train = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  // Validation batches drawn every 2 steps, and a pass at the end: left
  // unsharded (loader-drawn), its count not reduced.
  auto val = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  int64_t step = 0;
  double train_loss = 0;
  auto it = train->begin();
  while (it != train->end()) {
    auto &batch = *it;
    optimizer.zero_grad();
    auto loss = torch::cross_entropy_loss(net->forward(batch.data),
                                          batch.target);
    loss.backward();
    optimizer.step();
    train_loss += loss.item<double>();
    ++it;
    if (++step % 2 == 0) {
      torch::NoGradGuard no_grad;
      auto val_it = val->begin();
      auto val_batch = *val_it;
      auto val_loss = torch::cross_entropy_loss(net->forward(val_batch.data),
                                                val_batch.target);
      std::cout << "val_loss " << val_loss.item<double>() << '\n';
    }
  }
  std::cout << "train_loss " << train_loss << '\n';
  int64_t val_correct = 0;
  for (auto v = val->begin(); v != val->end(); ++v)
    val_correct +=
        net->forward(v->data).argmax(1).eq(v->target).sum().item<int64_t>();
  std::cout << "val_correct " << val_correct << '\n';

  // A pass by iterator, never reaching backward(): exact, reduced; also
  // spelled `(*loader).begin()` and through a reference.
  auto test = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  int64_t test_correct = 0;
  for (auto t = (*test).begin(); t != test->end(); ++t) {
    auto &batch = *t;
    test_correct +=
        net->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
  }
  std::cout << "test_correct " << test_correct << '\n';
  auto held = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  auto &ref = *held;
  int64_t held_seen = 0;
  for (auto h = ref.begin(); h != ref.end(); ++h)
    held_seen += h->data.size(0);
  std::cout << "held_seen " << held_seen << '\n';

  // One batch, trained on again and again: even.
  auto overfit = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  auto first = *overfit->begin();
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    torch::cross_entropy_loss(net->forward(first.data), first.target)
        .backward();
    optimizer.step();
  }
  // Re-taken at its end, inside a counted training loop: even.
  auto cyclic = torch::data::make_data_loader<RandomSampler>(stacked, 8);
  auto c = cyclic->begin();
  for (int i = 0; i < 12; ++i) {
    if (c == cyclic->end())
      c = cyclic->begin();
    optimizer.zero_grad();
    torch::cross_entropy_loss(net->forward(c->data), c->target).backward();
    optimizer.step();
    ++c;
  }

  // Negatives of a pass: a batch further on (std::next), a walk that may
  // stop early; both only evaluate: unsharded (loader-drawn), not reduced.
  auto probe = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  auto third = *std::next(probe->begin(), 2);
  std::cout << "probe " << net->forward(third.data).sum().item<double>()
            << '\n';
  auto partial = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  int64_t partial_seen = 0;
  for (auto p = partial->begin(); p != partial->end(); ++p) {
    partial_seen += p->data.size(0);
    if (partial_seen >= 20)
      break;
  }
  std::cout << "partial_seen " << partial_seen << '\n';

  // The iterator handed on: not followed (even, loader-use-unknown).
  auto handed = torch::data::make_data_loader<SequentialSampler>(stacked, 10);
  consume(handed->begin());
  return 0;
}
