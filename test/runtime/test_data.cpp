// Distributed data loading: ddp::make_data_loader / DistributedSampler.
// Single-process tests pin the sharding arithmetic with explicit rank and
// world size; multi-process tests (2 and 3 ranks on Gloo) check what the ranks
// actually receive by all-gathering it.

#include "multiprocess.h"

#include <ddp/data.h>
#include <ddp/distributed.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace {

using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

// Each example is its own index, so a batch tells which samples it holds.
struct IndexDataset : torch::data::datasets::Dataset<IndexDataset, int64_t> {
  explicit IndexDataset(size_t n) : n(n) {}
  int64_t get(size_t index) override { return static_cast<int64_t>(index); }
  c10::optional<size_t> size() const override { return n; }
  size_t n;
};

struct UnsizedDataset
    : torch::data::datasets::Dataset<UnsizedDataset, int64_t> {
  int64_t get(size_t index) override { return static_cast<int64_t>(index); }
  c10::optional<size_t> size() const override { return c10::nullopt; }
};

// One pass over a loader: the indices seen, in order, and the batch count.
struct Pass {
  std::vector<int64_t> indices;
  int batches = 0;
};

template <typename Loader> Pass run_epoch(Loader& loader) {
  Pass pass;
  for (auto& batch : loader) {
    ++pass.batches;
    pass.indices.insert(pass.indices.end(), batch.begin(), batch.end());
  }
  return pass;
}

template <typename Sampler>
std::vector<size_t> drain(Sampler& sampler, size_t batch = 5) {
  std::vector<size_t> all;
  while (auto b = sampler.next(batch)) {
    all.insert(all.end(), b->begin(), b->end());
  }
  return all;
}

std::vector<size_t> iota(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// ---------------------------------------------------------------------------
// Sharding arithmetic.

TEST(ShardIndices, EvenPadsByWrappingAround) {
  const auto all = iota(10);
  std::vector<size_t> seen;
  for (int64_t r = 0; r < 3; ++r) {
    const auto s = ddp::detail::shard_indices(all, r, 3, ddp::Shard::kEven);
    EXPECT_EQ(s.size(), 4u) << "rank " << r;
    seen.insert(seen.end(), s.begin(), s.end());
  }
  // 12 positions: 0..9 then 0, 1 again.
  std::sort(seen.begin(), seen.end());
  std::vector<size_t> expected = iota(10);
  expected.push_back(0);
  expected.push_back(1);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
  // Strided: rank 1 holds positions 1, 4, 7, 10 (10 wraps to index 0).
  EXPECT_EQ(ddp::detail::shard_indices(all, 1, 3, ddp::Shard::kEven),
            (std::vector<size_t>{1, 4, 7, 0}));
}

TEST(ShardIndices, ExactHasNoDuplicates) {
  const auto all = iota(10);
  std::vector<size_t> seen;
  std::vector<size_t> sizes;
  for (int64_t r = 0; r < 3; ++r) {
    const auto s = ddp::detail::shard_indices(all, r, 3, ddp::Shard::kExact);
    sizes.push_back(s.size());
    seen.insert(seen.end(), s.begin(), s.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 3, 3}));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, iota(10));
}

TEST(ShardIndices, FewerSamplesThanRanks) {
  const auto all = iota(2);
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(ddp::detail::shard_indices(all, r, 4, ddp::Shard::kEven).size(),
              1u);
  }
  EXPECT_EQ(ddp::detail::shard_indices(all, 3, 4, ddp::Shard::kExact).size(),
            0u);
  EXPECT_TRUE(ddp::detail::shard_indices({}, 0, 2, ddp::Shard::kEven).empty());
}

TEST(BatchStarts, EveryBatchOnceWhenEven) {
  // for (i = 0; i < 64; i += 16) on 2 ranks: batches 0, 2 and 1, 3.
  EXPECT_EQ(ddp::detail::batch_starts(0, 64, 16, 0, 2),
            (std::vector<int64_t>{0, 32}));
  EXPECT_EQ(ddp::detail::batch_starts(0, 64, 16, 1, 2),
            (std::vector<int64_t>{16, 48}));
  // A partial last batch is a batch: starts 0, 10, 20 (n = 25).
  EXPECT_EQ(ddp::detail::batch_starts(0, 25, 10, 0, 1),
            (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(ddp::detail::batch_starts(5, 9, 2, 0, 1),
            (std::vector<int64_t>{5, 7}));
}

TEST(BatchStarts, UnevenCountsPadSoEveryRankStepsAsOften) {
  // 5 batches on 2 ranks: 3 steps each, rank 1's last one wraps to batch 0.
  const auto r0 = ddp::detail::batch_starts(0, 50, 10, 0, 2);
  const auto r1 = ddp::detail::batch_starts(0, 50, 10, 1, 2);
  EXPECT_EQ(r0, (std::vector<int64_t>{0, 20, 40}));
  EXPECT_EQ(r1, (std::vector<int64_t>{10, 30, 0}));
  // Fewer batches than ranks: one step each.
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(ddp::detail::batch_starts(0, 8, 4, r, 3).size(), 1u);
  }
  // No batch at all: no step on any rank.
  EXPECT_TRUE(ddp::detail::batch_starts(3, 3, 4, 1, 2).empty());
  EXPECT_TRUE(ddp::detail::batch_starts(9, 3, 4, 0, 2).empty());
}

TEST(BatchStarts, WithoutLauncherEveryStart) {
  EXPECT_EQ(ddp::batch_starts(0, 30, 8), (std::vector<int64_t>{0, 8, 16, 24}));
  EXPECT_THROW(ddp::batch_starts(0, 30, 0), c10::Error);
}

TEST(RankBatches, EveryNthBatchPaddedAsBatchStarts) {
  // `for (auto& piece : x.split(2))` of 5 pieces on 2 ranks: pieces 0, 2, 4
  // and 1, 3, 0 (the last wraps around, so both ranks step 3 times).
  const auto pieces = torch::arange(10).split(2);
  ASSERT_EQ(pieces.size(), 5u);
  auto firsts = [](const std::vector<torch::Tensor>& batches) {
    std::vector<int64_t> out;
    for (const auto& batch : batches) {
      out.push_back(batch[0].item<int64_t>());
    }
    return out;
  };
  EXPECT_EQ(firsts(ddp::detail::rank_batches(pieces, 0, 2)),
            (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(firsts(ddp::detail::rank_batches(pieces, 1, 2)),
            (std::vector<int64_t>{2, 6, 0}));
  // Pairs of inputs and targets keep their pairing.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
  for (int64_t i = 0; i < 3; ++i) {
    pairs.emplace_back(torch::full({1}, i), torch::full({1}, 10 * i));
  }
  const auto own = ddp::detail::rank_batches(pairs, 1, 2);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].first.item<int64_t>(), 1);
  EXPECT_EQ(own[0].second.item<int64_t>(), 10);
  EXPECT_EQ(own[1].first.item<int64_t>(), 0);
  EXPECT_TRUE(
      ddp::detail::rank_batches(std::vector<torch::Tensor>{}, 1, 2).empty());
  // No launcher: every batch, in order.
  EXPECT_EQ(firsts(ddp::rank_batches(pieces)),
            (std::vector<int64_t>{0, 2, 4, 6, 8}));
}

TEST(ShardIndices, BadRankIsAnError) {
  EXPECT_THROW(ddp::detail::shard_indices(iota(3), 2, 2, ddp::Shard::kEven),
               c10::Error);
  EXPECT_THROW(
      ddp::DistributedSampler<SequentialSampler>(
          SequentialSampler(4), ddp::ShardOptions().rank(3).world_size(2)),
      c10::Error);
}

// ---------------------------------------------------------------------------
// DistributedSampler with explicit rank / world size (no process group).

ddp::ShardOptions shard_of(int64_t rank, int64_t world,
                           ddp::Shard mode = ddp::Shard::kEven) {
  return ddp::ShardOptions(mode).rank(rank).world_size(world);
}

TEST(DistributedSampler, RandomShardsCoverAndChangeEachEpoch) {
  const size_t n = 23;
  std::vector<ddp::DistributedSampler<RandomSampler>> samplers;
  for (int64_t r = 0; r < 3; ++r) {
    samplers.emplace_back(RandomSampler(n), shard_of(r, 3));
  }
  std::vector<std::vector<size_t>> previous(3);
  for (int epoch = 0; epoch < 3; ++epoch) {
    // Rank 0's generator is disturbed between ranks: the shared permutation
    // must not depend on the global random state.
    torch::manual_seed(1000 + epoch);
    std::vector<size_t> seen;
    for (int64_t r = 0; r < 3; ++r) {
      samplers[r].reset();
      torch::rand({17});
      EXPECT_EQ(samplers[r].epoch(), static_cast<size_t>(epoch));
      const auto shard = drain(samplers[r]);
      EXPECT_EQ(shard.size(), 8u); // ceil(23 / 3)
      if (epoch > 0) {
        EXPECT_NE(shard, previous[r]) << "same order in epoch " << epoch;
      }
      previous[r] = shard;
      seen.insert(seen.end(), shard.begin(), shard.end());
    }
    std::set<size_t> unique(seen.begin(), seen.end());
    EXPECT_EQ(unique.size(), n) << "epoch " << epoch << " misses samples";
    EXPECT_EQ(*unique.rbegin(), n - 1);
  }
}

TEST(DistributedSampler, SetEpochReproducesAnEpoch) {
  ddp::DistributedSampler<RandomSampler> sampler(RandomSampler(50),
                                                 shard_of(1, 2));
  std::vector<std::vector<size_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    sampler.reset();
    epochs.push_back(drain(sampler));
  }
  sampler.set_epoch(1);
  sampler.reset();
  EXPECT_EQ(sampler.epoch(), 1u);
  EXPECT_EQ(drain(sampler), epochs[1]);
  // And the epochs after it follow on.
  sampler.reset();
  EXPECT_EQ(drain(sampler), epochs[2]);
}

TEST(DistributedSampler, SeededDrawLeavesTheGlobalStreamAlone) {
  torch::manual_seed(3);
  // RandomSampler's constructor draws from the global generator, as without
  // ddp; the sampler's own seeded draws must not disturb it further.
  ddp::DistributedSampler<RandomSampler> sampler(RandomSampler(10),
                                                 shard_of(0, 2));
  sampler.reset();
  drain(sampler);
  const auto after = torch::rand({4});
  torch::manual_seed(3);
  RandomSampler plain(10);
  EXPECT_TRUE(torch::equal(torch::rand({4}), after));
}

TEST(DistributedSampler, SequentialKeepsOrderAndExactHasNoDuplicates) {
  const size_t n = 11;
  std::vector<size_t> seen;
  for (int64_t r = 0; r < 3; ++r) {
    ddp::DistributedSampler<SequentialSampler> sampler(
        SequentialSampler(n), shard_of(r, 3, ddp::Shard::kExact));
    sampler.reset();
    const auto shard = drain(sampler);
    EXPECT_TRUE(std::is_sorted(shard.begin(), shard.end()));
    seen.insert(seen.end(), shard.begin(), shard.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, iota(n)); // exactly the dataset: no duplicate, none missing
}

// Exact shards of 41 samples in batches of 10: rank 0 holds 21 (10, 10, 1),
// rank 1 holds 20, cut into as many batches (10, 9, 1), so a collective in
// the loop's body runs as often on both; unless the loader drops short
// batches (the natural cut, 10 and 10).
TEST(DistributedSampler, ExactShardsHaveEqualBatchCounts) {
  auto sizes = [](int64_t rank, bool equal) {
    ddp::DistributedSampler<SequentialSampler> sampler(
        SequentialSampler(41), shard_of(rank, 2, ddp::Shard::kExact));
    sampler.equal_batch_counts(equal);
    sampler.reset();
    std::vector<size_t> out;
    while (auto batch = sampler.next(10)) {
      out.push_back(batch->size());
    }
    return out;
  };
  EXPECT_EQ(sizes(0, true), (std::vector<size_t>{10, 10, 1}));
  EXPECT_EQ(sizes(1, true), (std::vector<size_t>{10, 9, 1}));
  EXPECT_EQ(sizes(1, false), (std::vector<size_t>{10, 10}));
  // Even shards are equal already: the natural cut.
  ddp::DistributedSampler<SequentialSampler> even(SequentialSampler(41),
                                                  shard_of(1, 2));
  even.reset();
  std::vector<size_t> even_sizes;
  while (auto batch = even.next(10)) {
    even_sizes.push_back(batch->size());
  }
  EXPECT_EQ(even_sizes, (std::vector<size_t>{10, 10, 1}));
  EXPECT_EQ(ddp::detail::next_batch_size(5, 4, 0, 5), 4u);
  EXPECT_EQ(ddp::detail::next_batch_size(1, 4, 1, 5), 1u);
}

TEST(DistributedSampler, ExactSaveLoadResumesAtTheSameCut) {
  ddp::DistributedSampler<SequentialSampler> sampler(
      SequentialSampler(41), shard_of(1, 2, ddp::Shard::kExact));
  sampler.reset();
  ASSERT_TRUE(sampler.next(10).has_value());
  torch::serialize::OutputArchive out;
  sampler.save(out);
  std::stringstream stream;
  out.save_to(stream);
  ddp::DistributedSampler<SequentialSampler> restored(
      SequentialSampler(41), shard_of(1, 2, ddp::Shard::kExact));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  restored.load(in);
  EXPECT_EQ(restored.next(10)->size(), 9u);
  EXPECT_EQ(restored.next(10)->size(), 1u);
  EXPECT_FALSE(restored.next(10).has_value());
}

TEST(DistributedSampler, SaveLoadResumesMidEpoch) {
  ddp::DistributedSampler<RandomSampler> sampler(RandomSampler(40),
                                                 shard_of(0, 2));
  sampler.reset();
  sampler.reset(); // epoch 1
  const auto first = sampler.next(6);
  ASSERT_TRUE(first.has_value());
  torch::serialize::OutputArchive out;
  sampler.save(out);
  std::stringstream stream;
  out.save_to(stream);
  const auto rest = drain(sampler);

  ddp::DistributedSampler<RandomSampler> restored(RandomSampler(40),
                                                  shard_of(0, 2));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  restored.load(in);
  EXPECT_EQ(restored.epoch(), 1u);
  EXPECT_EQ(drain(restored), rest);
}

// ---------------------------------------------------------------------------
// World size 1 (no ddp::init): the original sampler's behaviour, unchanged.

TEST(MakeDataLoader, WorldSizeOneEqualsTorchLoader) {
  ASSERT_EQ(ddp::world_size(), 1);
  torch::manual_seed(42);
  auto plain = torch::data::make_data_loader(IndexDataset(37), 5);
  std::vector<Pass> expected;
  for (int e = 0; e < 2; ++e) {
    expected.push_back(run_epoch(*plain));
  }
  torch::manual_seed(42);
  auto sharded = ddp::make_data_loader(IndexDataset(37), 5);
  for (int e = 0; e < 2; ++e) {
    const Pass got = run_epoch(*sharded);
    EXPECT_EQ(got.indices, expected[e].indices) << "epoch " << e;
    EXPECT_EQ(got.batches, expected[e].batches);
  }
  // Sequential, and the sampler-object overload.
  auto seq = ddp::make_data_loader(IndexDataset(9), SequentialSampler(9), 4);
  const Pass pass = run_epoch(*seq);
  EXPECT_EQ(pass.indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(pass.batches, 3);
}

TEST(MakeDataLoader, UnsizedDatasetIsAClearError) {
  try {
    ddp::make_data_loader(UnsizedDataset(), 4);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no size()"), std::string::npos)
        << e.what();
  }
}

TEST(MakeDataLoader, OverloadsCompileAndShard) {
  // Every spelling of torch::data::make_data_loader, plus the shard argument.
  auto a = ddp::make_data_loader(IndexDataset(10), RandomSampler(10),
                                 torch::data::DataLoaderOptions(3));
  auto b = ddp::make_data_loader<SequentialSampler>(IndexDataset(10), 3);
  auto c = ddp::make_data_loader<SequentialSampler>(
      IndexDataset(10), torch::data::DataLoaderOptions(3).workers(2),
      ddp::Shard::kExact);
  auto d = ddp::make_eval_data_loader<SequentialSampler>(IndexDataset(10), 3);
  auto e =
      ddp::make_eval_data_loader(IndexDataset(10), SequentialSampler(10), 3);
  auto f = ddp::make_data_loader(IndexDataset(10));
  auto g = ddp::make_data_loader(IndexDataset(10),
                                 ddp::DistributedSampler<SequentialSampler>(
                                     SequentialSampler(10), shard_of(1, 2)),
                                 4);
  EXPECT_EQ(d->sampler().options().mode(), ddp::Shard::kExact);
  EXPECT_EQ(c->sampler().options().mode(), ddp::Shard::kExact);
  EXPECT_EQ(b->sampler().options().mode(), ddp::Shard::kEven);
  for (auto* loader_sizes : {&a, &f}) {
    EXPECT_EQ(run_epoch(**loader_sizes).indices.size(), 10u);
  }
  std::vector<int64_t> sorted = run_epoch(*c).indices;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(run_epoch(*e).indices.size(), 10u);
  EXPECT_EQ(run_epoch(*g).indices, (std::vector<int64_t>{1, 3, 5, 7, 9}));
  ddp::set_epoch(g, 4);
  run_epoch(*g);
  EXPECT_EQ(g->epoch(), 4u);
}

// The usual training-program shape: Example<> items, .map(Stack<>()), worker
// threads.
struct PairDataset : torch::data::datasets::Dataset<PairDataset> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({2}, static_cast<float>(i)),
            torch::tensor(static_cast<int64_t>(i))};
  }
  c10::optional<size_t> size() const override { return 10; }
};

TEST(MakeDataLoader, MappedDatasetWithWorkers) {
  auto loader = ddp::make_data_loader(
      PairDataset().map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(4).workers(2));
  std::vector<int64_t> seen;
  for (int epoch = 0; epoch < 2; ++epoch) {
    seen.clear();
    for (auto& batch : *loader) {
      EXPECT_EQ(batch.data.size(1), 2);
      for (int64_t i = 0; i < batch.target.size(0); ++i) {
        seen.push_back(batch.target[i].item<int64_t>());
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
}

// ---------------------------------------------------------------------------
// Several ranks on Gloo.

// All ranks' index sequences for one pass, padded with -1 to `width`.
std::vector<std::vector<int64_t>>
gather_indices(const std::vector<int64_t>& mine, int64_t width) {
  auto t = torch::full({width}, -1, torch::kLong);
  EXPECT_LE(static_cast<int64_t>(mine.size()), width);
  for (size_t i = 0; i < mine.size() && static_cast<int64_t>(i) < width; ++i) {
    t[i] = mine[i];
  }
  std::vector<std::vector<int64_t>> all;
  for (const auto& g : ddp::all_gather(t)) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < width; ++i) {
      const int64_t x = g[i].item<int64_t>();
      if (x >= 0) {
        v.push_back(x);
      }
    }
    all.push_back(v);
  }
  return all;
}

template <typename Sampler>
void check_even_training_loader(int64_t n, int64_t batch) {
  const int64_t world = ddp::world_size();
  // Each rank disturbs its own generator differently: the shuffle must still
  // be one permutation shared by every rank.
  torch::manual_seed(ddp::rank() * 7919 + 1);
  auto loader = ddp::make_data_loader<Sampler>(IndexDataset(n), batch);
  const int64_t per_rank = (n + world - 1) / world;
  std::vector<std::vector<int64_t>> my_epochs;
  for (int epoch = 0; epoch < 3; ++epoch) {
    const Pass pass = run_epoch(*loader);
    EXPECT_EQ(static_cast<int64_t>(pass.indices.size()), per_rank);
    // Same number of batches on every rank.
    auto count = torch::tensor({static_cast<int64_t>(pass.batches)});
    for (const auto& c : ddp::all_gather(count)) {
      EXPECT_EQ(c.item<int64_t>(), pass.batches) << "epoch " << epoch;
    }
    // Interleaving the ranks' shards by stride rebuilds one padded sequence:
    // a permutation of the dataset followed by its own first elements.
    const auto all = gather_indices(pass.indices, per_rank);
    std::vector<int64_t> sequence;
    for (int64_t i = 0; i < per_rank; ++i) {
      for (int64_t r = 0; r < world; ++r) {
        sequence.push_back(all[r][i]);
      }
    }
    std::vector<int64_t> head(sequence.begin(), sequence.begin() + n);
    std::sort(head.begin(), head.end());
    std::vector<int64_t> expected(n);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(head, expected) << "epoch " << epoch << ": shards do not cover "
                              << "the dataset as one shared permutation";
    for (size_t i = n; i < sequence.size(); ++i) {
      EXPECT_EQ(sequence[i], sequence[i - n]) << "padding is not a wrap-around";
    }
    my_epochs.push_back(pass.indices);
  }
  if (std::is_same<Sampler, SequentialSampler>::value) {
    EXPECT_EQ(my_epochs[0], my_epochs[1]);
    for (int64_t i = 0; i < per_rank; ++i) {
      // Strided in dataset order, the padded tail wrapping to the start.
      EXPECT_EQ(my_epochs[0][i], (ddp::rank() + i * world) % n);
    }
  } else {
    EXPECT_NE(my_epochs[0], my_epochs[1]) << "no new shuffle in epoch 1";
    EXPECT_NE(my_epochs[1], my_epochs[2]) << "no new shuffle in epoch 2";
    // Resuming at epoch 1 replays it.
    ddp::set_epoch(loader, 1);
    EXPECT_EQ(run_epoch(*loader).indices, my_epochs[1]);
  }
}

void check_exact_eval_loader(int64_t n, bool sequential) {
  const int64_t world = ddp::world_size();
  torch::manual_seed(ddp::rank() + 5);
  std::vector<int64_t> mine;
  int batches = 0;
  if (sequential) {
    auto loader =
        ddp::make_eval_data_loader<SequentialSampler>(IndexDataset(n), 4);
    const Pass pass = run_epoch(*loader);
    mine = pass.indices;
    batches = pass.batches;
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  } else {
    auto loader = ddp::make_data_loader(IndexDataset(n), RandomSampler(n), 4,
                                        ddp::Shard::kExact);
    run_epoch(*loader);
    const Pass pass = run_epoch(*loader); // the second epoch, too
    mine = pass.indices;
    batches = pass.batches;
  }
  // As many batches on every rank, though the shards differ by a sample.
  auto count = torch::tensor({static_cast<int64_t>(batches)});
  for (const auto& c : ddp::all_gather(count)) {
    EXPECT_EQ(c.item<int64_t>(), batches) << n << " samples";
  }
  const int64_t width = (n + world - 1) / world;
  std::vector<int64_t> all_indices;
  for (const auto& shard : gather_indices(mine, width)) {
    all_indices.insert(all_indices.end(), shard.begin(), shard.end());
  }
  std::sort(all_indices.begin(), all_indices.end());
  std::vector<int64_t> expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all_indices, expected) << "exact shards must hold each sample once";
}

TEST(DistributedLoader, EvenRandomTwoRanks) {
  ddp_test::run_ranks(2,
                      [] { check_even_training_loader<RandomSampler>(23, 4); });
}

TEST(DistributedLoader, EvenRandomThreeRanks) {
  ddp_test::run_ranks(3,
                      [] { check_even_training_loader<RandomSampler>(23, 4); });
}

TEST(DistributedLoader, EvenSequentialThreeRanks) {
  ddp_test::run_ranks(
      3, [] { check_even_training_loader<SequentialSampler>(20, 3); });
}

// A loader made before ddp::init() picks up the process group at its first
// pass.
TEST(DistributedLoader, BuiltBeforeInitShardsAfterIt) {
  ddp_test::RankOptions options;
  options.init = false;
  ddp_test::run_ranks(
      2,
      [] {
        auto loader = ddp::make_data_loader(IndexDataset(15), 4);
        ddp::init();
        ASSERT_EQ(ddp::world_size(), 2);
        const Pass pass = run_epoch(*loader);
        EXPECT_EQ(pass.indices.size(), 8u);
        EXPECT_EQ(pass.batches, 2);
        EXPECT_EQ(loader->sampler().rank(), ddp::rank());
      },
      options);
}

TEST(DistributedLoader, ExactTwoRanks) {
  ddp_test::run_ranks(2, [] {
    check_exact_eval_loader(21, /*sequential=*/true);
    check_exact_eval_loader(21, /*sequential=*/false);
    // Shards of 13 and 12: 4 batches and 3 in the natural cut.
    check_exact_eval_loader(25, /*sequential=*/true);
    check_exact_eval_loader(25, /*sequential=*/false);
  });
}

TEST(DistributedLoader, ExactThreeRanks) {
  ddp_test::run_ranks(3, [] {
    check_exact_eval_loader(20, /*sequential=*/true);
    check_exact_eval_loader(20, /*sequential=*/false);
  });
}

} // namespace
