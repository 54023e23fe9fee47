#pragma once

// Distributed data loading: ddp::make_data_loader mirrors every overload of
// torch::data::make_data_loader and gives each rank its share of the samples.
//
//   auto train = ddp::make_data_loader(std::move(ds), 64);                  //
//   even (training) auto train =
//   ddp::make_data_loader<SequentialSampler>(std::move(ds), opts); auto test  =
//   ddp::make_data_loader(std::move(ds), sampler, opts, ddp::Shard::kExact);
//   auto test  = ddp::make_eval_data_loader(std::move(ds), 64);             //
//   exact (evaluation)
//
// Sharding (ddp::DistributedSampler<Inner>, a torch sampler wrapping any
// index sampler): the full index sequence the inner sampler produces for one
// epoch is split by stride, rank r taking positions r, r+W, r+2W, ...
//  - Shard::kEven (default): the sequence is first padded by wrapping around to
//    a multiple of the world size, so every rank gets the same number of
//    samples and runs the same number of batches (a rank running one batch
//    fewer would hang the others in a collective).
//  - Shard::kExact: no padding; no sample is seen twice, so evaluation metrics
//    are exact; ranks may differ by one sample, but are cut into as many
//    batches (a short one more where needed), so a collective in the loop
//    (SyncBatchNorm in training mode) runs as often on every rank.
// Random samplers draw from LibTorch's default CPU generator; at world size > 1
// the inner sampler is reset under that generator seeded with seed + epoch
// (the caller's generator state is restored afterwards), so every rank holds
// the same permutation without any communication. The data loader calls
// reset() at each begin(), i.e. each epoch, and reset() advances the epoch: a
// new shuffle every epoch with no set_epoch call. set_epoch(n) chooses the
// epoch of the next pass, for resuming.
// At world size 1 (or without ddp::init) the adapter forwards to the inner
// sampler untouched: the program sees exactly the samples it saw before.

#include <ddp/distributed.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace ddp {

/// How a loader's samples are split across ranks.
enum class Shard {
  /// Padded by wrapping around: equal sample counts on every rank (training).
  kEven,
  /// No sample twice: ranks may differ by one sample (evaluation).
  kExact,
};

/// Options of DistributedSampler. Implicit from a Shard, so a Shard can be
/// passed wherever ShardOptions are expected.
struct ShardOptions {
  /* implicit */ ShardOptions(Shard mode = Shard::kEven) : mode_(mode) {}
  TORCH_ARG(Shard, mode);
  /// Base of the per-epoch seed (seed + epoch) of random samplers; the same on
  /// every rank by default, like PyTorch's DistributedSampler.
  TORCH_ARG(uint64_t, seed) = 0;
  /// This process's shard; ddp::rank() when unset.
  TORCH_ARG(c10::optional<int64_t>, rank) = c10::nullopt;
  /// Number of shards; ddp::world_size() when unset.
  TORCH_ARG(c10::optional<int64_t>, world_size) = c10::nullopt;
};

namespace detail {

/// Positions rank, rank + W, ... of `indices` (padded by wrapping around to a
/// multiple of W in kEven mode).
std::vector<size_t> shard_indices(const std::vector<size_t>& indices,
                                  int64_t rank, int64_t world_size, Shard mode);

/// The starts of batch loop positions rank, rank + W, ... of
/// `for (i = begin; i < end; i += step)` (padded by wrapping around, as kEven).
std::vector<int64_t> batch_starts(int64_t begin, int64_t end, int64_t step,
                                  int64_t rank, int64_t world_size);

/// Seeds LibTorch's default CPU generator for its lifetime and then restores
/// the previous state, so sharing a permutation leaves the program's random
/// stream as it was.
class SeededDefaultGenerator {
public:
  explicit SeededDefaultGenerator(uint64_t seed);
  ~SeededDefaultGenerator();
  SeededDefaultGenerator(const SeededDefaultGenerator&) = delete;
  SeededDefaultGenerator& operator=(const SeededDefaultGenerator&) = delete;

private:
  torch::Tensor saved_state_;
};

/// The size of a rank's next batch: `batch_size` samples, or fewer where
/// the rank's `remaining` samples must still fill as many batches as the
/// largest shard (`widest` samples) is cut into, `taken` of them served.
/// With `widest` = the rank's own shard, the natural cut.
size_t next_batch_size(size_t remaining, size_t batch_size, size_t taken,
                       size_t widest);

/// Resolves and checks the rank and world size of `options`.
std::pair<int64_t, int64_t> resolve_shard(const ShardOptions& options);

/// Kept for programs built against an older <ddp/data.h>: the safety net
/// for unwrapped training (docs/runtime-ddp.md) now watches backward passes
/// itself. Does nothing.
void check_unwrapped_training();

/// Whether T is a torch sampler (derives from Sampler<T::BatchRequestType>).
// std::void_t is C++17; migrated programs may be C++14 (LibTorch 1.13's
// minimum).
template <typename...> struct make_void {
  using type = void;
};
template <typename T, typename = void> struct is_sampler : std::false_type {};
template <typename T>
struct is_sampler<T, typename make_void<typename T::BatchRequestType>::type>
    : std::is_base_of<
          torch::data::samplers::Sampler<typename T::BatchRequestType>, T> {};

} // namespace detail

/// This process's batches of a training loop that cuts its batches from
/// tensors by hand, `for (int64_t i = begin; i < end; i += step)`, written
/// `for (int64_t i : ddp::batch_starts(begin, end, step))`: the loop's
/// batches rank, rank + world_size(), ..., padded by wrapping around to the
/// first ones so that every process runs the same number of steps (one with
/// a step fewer would leave the others waiting in the gradient all-reduce).
/// At world size 1 (no launcher), every start, as the original loop.
inline std::vector<int64_t> batch_starts(int64_t begin, int64_t end,
                                         int64_t step) {
  return detail::batch_starts(begin, end, step, rank(), world_size());
}

namespace detail {
/// Positions rank, rank + W, ... of `batches`, padded as batch_starts.
template <typename Batch>
std::vector<Batch> rank_batches(const std::vector<Batch>& batches, int64_t rank,
                                int64_t world_size) {
  std::vector<Batch> own;
  for (int64_t i : batch_starts(0, static_cast<int64_t>(batches.size()), 1,
                                rank, world_size)) {
    own.push_back(batches[static_cast<size_t>(i)]);
  }
  return own;
}
} // namespace detail

/// This process's batches of a training loop over batches cut beforehand,
/// `for (auto& batch : x.split(size))` (or a vector of input/target pairs,
/// of examples), written `for (auto& batch : ddp::rank_batches(...))`:
/// positions rank, rank + world_size(), ..., padded by wrapping around as
/// batch_starts, so that every process runs the same number of steps. The
/// batches are copied (a tensor's copy shares its data). At world size 1,
/// every batch, as the original loop.
template <typename Batch>
std::vector<Batch> rank_batches(const std::vector<Batch>& batches) {
  return detail::rank_batches(batches, rank(), world_size());
}

template <typename Inner> class DistributedSampler;

namespace detail {
template <typename T> struct is_ddp_sampler : std::false_type {};
template <typename Inner>
struct is_ddp_sampler<DistributedSampler<Inner>> : std::true_type {};
/// A plain torch sampler, to be wrapped in a DistributedSampler.
template <typename T>
using enable_if_plain_sampler_t =
    std::enable_if_t<is_sampler<T>::value && !is_ddp_sampler<T>::value>;
} // namespace detail

/// Shards the indices of any index sampler (RandomSampler, SequentialSampler,
/// a custom one producing std::vector<size_t>) across ranks.
///
/// Copies share one state (it is a handle): the copy a data loader owns and
/// the one its DistributedDataLoader keeps for set_epoch() are the same
/// sampler.
template <typename Inner = torch::data::samplers::RandomSampler>
class DistributedSampler
    : public torch::data::samplers::Sampler<std::vector<size_t>> {
  static_assert(detail::is_sampler<Inner>::value,
                "ddp::DistributedSampler wraps a torch::data sampler");
  static_assert(
      std::is_same<typename Inner::BatchRequestType,
                   std::vector<size_t>>::value,
      "ddp::DistributedSampler needs a sampler producing index vectors "
      "(std::vector<size_t>); a StreamSampler or custom batch request cannot "
      "be "
      "sharded by index");
  static_assert(
      !std::is_base_of<torch::data::samplers::DistributedSampler<>,
                       Inner>::value,
      "this sampler is already distributed (torch::data::samplers::Distributed"
      "*Sampler); keep torch::data::make_data_loader for it, or pass the plain "
      "sampler to ddp::make_data_loader");

public:
  using InnerSampler = Inner;

  explicit DistributedSampler(Inner inner, ShardOptions options = {})
      : state_(std::make_shared<State>(std::move(inner), std::move(options))) {}

  /// Starts a pass (the data loader calls it at each begin()): this pass uses
  /// epoch set_epoch() chose, or the previous epoch + 1.
  void reset(c10::optional<size_t> new_size = c10::nullopt) override {
    State& s = *state_;
    // Resolved again here so that a loader built before ddp::init() still
    // shards once the process group exists.
    std::tie(s.rank, s.world_size) = detail::resolve_shard(s.options);
    s.epoch = s.next_epoch++;
    if (s.world_size == 1) {
      s.inner.reset(new_size);
      return;
    }
    build(new_size);
  }

  c10::optional<std::vector<size_t>> next(size_t batch_size) override {
    State& s = *state_;
    if (s.world_size == 1) {
      return s.inner.next(batch_size);
    }
    if (!s.built) {
      build(c10::nullopt);
    }
    s.last_batch_size = batch_size;
    if (s.position >= s.shard.size()) {
      return c10::nullopt;
    }
    const size_t n = detail::next_batch_size(
        s.shard.size() - s.position, batch_size, s.batches,
        equal_batch_counts() ? max_shard_size() : s.shard.size());
    std::vector<size_t> batch(s.shard.begin() + s.position,
                              s.shard.begin() + s.position + n);
    s.position += n;
    ++s.batches;
    return batch;
  }

  /// Whether exact shards (which may differ by a sample) are cut into as
  /// many batches on every rank, a short one more where needed (the loader
  /// sets it unless it drops short batches). A collective in the loop's body
  /// (SyncBatchNorm in training mode, a metric's all-reduce) then runs as
  /// often on every rank.
  void equal_batch_counts(bool on) { state_->equal_batch_counts = on; }
  bool equal_batch_counts() const {
    return state_->equal_batch_counts &&
           state_->options.mode() == Shard::kExact;
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    const State& s = *state_;
    archive.write("ddp_epoch", static_cast<int64_t>(s.epoch));
    archive.write("ddp_next_epoch", static_cast<int64_t>(s.next_epoch));
    archive.write("ddp_position", static_cast<int64_t>(s.position));
    archive.write("ddp_batch_size", static_cast<int64_t>(s.last_batch_size));
    // At world size 1 the inner sampler is the whole state.
    torch::serialize::OutputArchive inner;
    s.inner.save(inner);
    archive.write("ddp_inner", inner);
  }

  void load(torch::serialize::InputArchive& archive) override {
    State& s = *state_;
    c10::IValue value;
    archive.read("ddp_epoch", value);
    s.epoch = static_cast<size_t>(value.toInt());
    archive.read("ddp_next_epoch", value);
    s.next_epoch = static_cast<size_t>(value.toInt());
    archive.read("ddp_position", value);
    const auto position = static_cast<size_t>(value.toInt());
    // Written since batches of exact shards follow their count; an older
    // archive resumes at the natural cut.
    const size_t batch_size = archive.try_read("ddp_batch_size", value)
                                  ? static_cast<size_t>(value.toInt())
                                  : 0;
    torch::serialize::InputArchive inner;
    archive.read("ddp_inner", inner);
    s.inner.load(inner);
    if (s.world_size > 1) {
      // The shard is a function of the epoch: rebuild it, then skip ahead
      // batch by batch (their sizes follow from the count taken).
      build(c10::nullopt);
      while (batch_size > 0 &&
             s.position < std::min(position, s.shard.size())) {
        s.position += detail::next_batch_size(
            s.shard.size() - s.position, batch_size, s.batches,
            equal_batch_counts() ? max_shard_size() : s.shard.size());
        ++s.batches;
      }
      s.position = std::min(position, s.shard.size());
    }
  }

  /// The epoch of the next pass (the next begin() of the loader). PyTorch's
  /// DistributedSampler.set_epoch; only needed to resume at a given epoch.
  void set_epoch(size_t epoch) { state_->next_epoch = epoch; }
  /// The epoch of the current (or last) pass.
  size_t epoch() const { return state_->epoch; }

  int64_t rank() const { return state_->rank; }
  int64_t world_size() const { return state_->world_size; }
  const ShardOptions& options() const { return state_->options; }
  Inner& inner() { return state_->inner; }

  /// This rank's indices for the current pass (world size > 1; at world size
  /// 1 the inner sampler serves the indices itself and this is empty).
  const std::vector<size_t>& indices() {
    if (state_->world_size > 1 && !state_->built) {
      build(c10::nullopt);
    }
    return state_->shard;
  }

private:
  struct State {
    State(Inner inner_, ShardOptions options_)
        : inner(std::move(inner_)), options(std::move(options_)) {
      std::tie(rank, world_size) = detail::resolve_shard(options);
    }
    Inner inner;
    ShardOptions options;
    int64_t rank = 0;
    int64_t world_size = 1;
    size_t epoch = 0;
    size_t next_epoch = 0;
    bool built = false;
    std::vector<size_t> shard;
    size_t position = 0;
    /// Batches served in this pass, and the batch size asked for.
    size_t batches = 0;
    size_t last_batch_size = 0;
    /// Samples in the whole pass (every rank's shards).
    size_t total = 0;
    bool equal_batch_counts = true;
  };

  /// The largest rank's shard: ceil(total / world size).
  size_t max_shard_size() const {
    const State& s = *state_;
    const auto w = static_cast<size_t>(s.world_size);
    return (s.total + w - 1) / w;
  }

  // Draws the epoch's full sequence from the inner sampler, under the shared
  // seed, and keeps this rank's share.
  void build(c10::optional<size_t> new_size) {
    State& s = *state_;
    std::vector<size_t> all;
    {
      detail::SeededDefaultGenerator seeded(s.options.seed() + s.epoch);
      s.inner.reset(new_size);
      constexpr size_t kChunk = size_t(1) << 16;
      while (auto batch = s.inner.next(kChunk)) {
        if (batch->empty()) {
          break; // a sampler that never ends would otherwise spin here
        }
        all.insert(all.end(), batch->begin(), batch->end());
      }
    }
    s.shard =
        detail::shard_indices(all, s.rank, s.world_size, s.options.mode());
    s.total = all.size();
    s.position = 0;
    s.batches = 0;
    s.built = true;
  }

  std::shared_ptr<State> state_;
};

/// The loader ddp::make_data_loader returns: torch's StatelessDataLoader over a
/// DistributedSampler, plus access to that sampler for set_epoch().
template <typename Dataset, typename Inner>
class DistributedDataLoader
    : public torch::data::StatelessDataLoader<Dataset,
                                              DistributedSampler<Inner>> {
public:
  using SamplerType = DistributedSampler<Inner>;
  using super = torch::data::StatelessDataLoader<Dataset, SamplerType>;

  DistributedDataLoader(Dataset dataset, SamplerType sampler,
                        torch::data::DataLoaderOptions options)
      : super(std::move(dataset), sampler, std::move(options)),
        sampler_(std::move(sampler)) {
    // Short batches a loader drops would end its pass early: keep the
    // natural cut there.
    sampler_.equal_batch_counts(!this->options().drop_last);
  }

  /// The epoch of the next pass over the loader (for resuming).
  void set_epoch(size_t epoch) { sampler_.set_epoch(epoch); }
  /// The epoch of the current (or last) pass.
  size_t epoch() const { return sampler_.epoch(); }
  /// The loader's sampler (a handle to the same state).
  SamplerType& sampler() { return sampler_; }

private:
  SamplerType sampler_;
};

/// Dataset + a ddp::DistributedSampler built by the caller: used as is.
template <typename Dataset, typename Inner>
std::unique_ptr<DistributedDataLoader<Dataset, Inner>> make_data_loader(
    Dataset dataset, DistributedSampler<Inner> sampler,
    torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions()) {
  static_assert(!Dataset::is_stateful,
                "ddp::make_data_loader: a stateful dataset has no indices to "
                "shard; split the data inside the dataset (by ddp::rank()) and "
                "keep torch::data::make_data_loader");
  return std::make_unique<DistributedDataLoader<Dataset, Inner>>(
      std::move(dataset), std::move(sampler), std::move(options));
}

/// torch::data::make_data_loader(dataset, sampler, options), sharded.
template <typename Dataset, typename Sampler,
          typename = detail::enable_if_plain_sampler_t<Sampler>>
std::unique_ptr<DistributedDataLoader<Dataset, Sampler>> make_data_loader(
    Dataset dataset, Sampler sampler,
    torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions(),
    ShardOptions shard = ShardOptions()) {
  return make_data_loader(
      std::move(dataset),
      DistributedSampler<Sampler>(std::move(sampler), std::move(shard)),
      std::move(options));
}

/// torch::data::make_data_loader<Sampler>(dataset, options), sharded: the
/// sampler (RandomSampler by default, like torch) is built for dataset.size().
template <typename Sampler = torch::data::samplers::RandomSampler,
          typename Dataset>
std::unique_ptr<DistributedDataLoader<Dataset, Sampler>> make_data_loader(
    Dataset dataset,
    torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions(),
    ShardOptions shard = ShardOptions()) {
  static_assert(!Dataset::is_stateful,
                "ddp::make_data_loader: a stateful dataset has no size and no "
                "indices to shard; split the data inside the dataset (by "
                "ddp::rank()) and keep torch::data::make_data_loader");
  static_assert(std::is_constructible<Sampler, size_t>::value,
                "ddp::make_data_loader<Sampler>: the sampler must be "
                "constructible from the dataset size; pass a sampler object");
  const c10::optional<size_t> size = dataset.size();
  TORCH_CHECK(size.has_value(),
              "ddp::make_data_loader: the dataset has no size(), so its "
              "samples cannot be sharded across ranks");
  return make_data_loader(std::move(dataset), Sampler(*size),
                          std::move(options), std::move(shard));
}

/// make_data_loader in Shard::kExact mode (evaluation: no sample twice).
template <typename Dataset, typename Sampler,
          typename = detail::enable_if_plain_sampler_t<Sampler>>
std::unique_ptr<DistributedDataLoader<Dataset, Sampler>> make_eval_data_loader(
    Dataset dataset, Sampler sampler,
    torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions(),
    ShardOptions shard = ShardOptions()) {
  shard.mode(Shard::kExact);
  return make_data_loader(std::move(dataset), std::move(sampler),
                          std::move(options), std::move(shard));
}

/// make_data_loader<Sampler> in Shard::kExact mode (evaluation).
template <typename Sampler = torch::data::samplers::RandomSampler,
          typename Dataset>
std::unique_ptr<DistributedDataLoader<Dataset, Sampler>> make_eval_data_loader(
    Dataset dataset,
    torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions(),
    ShardOptions shard = ShardOptions()) {
  shard.mode(Shard::kExact);
  return make_data_loader<Sampler>(std::move(dataset), std::move(options),
                                   std::move(shard));
}

/// Chooses the epoch of the loader's next pass (for resuming a run).
template <typename Dataset, typename Inner>
void set_epoch(DistributedDataLoader<Dataset, Inner>& loader, size_t epoch) {
  loader.set_epoch(epoch);
}
template <typename Dataset, typename Inner>
void set_epoch(
    const std::unique_ptr<DistributedDataLoader<Dataset, Inner>>& loader,
    size_t epoch) {
  loader->set_epoch(epoch);
}

} // namespace ddp
