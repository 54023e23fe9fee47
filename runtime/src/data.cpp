#include <ddp/data.h>

#include <ddp/distributed.h>

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace ddp {
namespace detail {

std::vector<size_t> shard_indices(const std::vector<size_t>& indices,
                                  int64_t rank, int64_t world_size,
                                  Shard mode) {
  TORCH_CHECK(world_size >= 1, "ddp: world size must be at least 1, got ",
              world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "ddp: rank ", rank,
              " is outside [0, ", world_size, ")");
  const size_t n = indices.size();
  const auto w = static_cast<size_t>(world_size);
  // Even: round up to a multiple of W, the extra positions wrapping around to
  // the start (several times when n < W), as PyTorch's DistributedSampler.
  const size_t total = (mode == Shard::kEven) ? (n + w - 1) / w * w : n;
  std::vector<size_t> shard;
  shard.reserve(total / w + 1);
  for (size_t i = static_cast<size_t>(rank); i < total; i += w) {
    shard.push_back(indices[i % n]);
  }
  return shard;
}

size_t next_batch_size(size_t remaining, size_t batch_size, size_t taken,
                       size_t widest) {
  batch_size = std::max<size_t>(batch_size, 1);
  const size_t count = (widest + batch_size - 1) / batch_size;
  // Batches still to come after this one, each needing a sample.
  const size_t after = count > taken + 1 ? count - taken - 1 : 0;
  const size_t room = remaining > after ? remaining - after : 1;
  return std::max<size_t>(std::min({batch_size, room, remaining}), 1);
}

std::vector<int64_t> batch_starts(int64_t begin, int64_t end, int64_t step,
                                  int64_t rank, int64_t world_size) {
  TORCH_CHECK(step > 0,
              "ddp::batch_starts: the step of a batch loop must be "
              "positive, got ",
              step);
  const int64_t count = end > begin ? (end - begin - 1) / step + 1 : 0;
  std::vector<size_t> batches(static_cast<size_t>(count));
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i] = i;
  }
  std::vector<int64_t> starts;
  for (size_t batch : shard_indices(batches, rank, world_size, Shard::kEven)) {
    starts.push_back(begin + static_cast<int64_t>(batch) * step);
  }
  return starts;
}

SeededDefaultGenerator::SeededDefaultGenerator(uint64_t seed) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  saved_state_ = generator.get_state();
  generator.set_current_seed(seed);
}

SeededDefaultGenerator::~SeededDefaultGenerator() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(saved_state_);
}

std::pair<int64_t, int64_t> resolve_shard(const ShardOptions& options) {
  const int64_t world_size = options.world_size().value_or(ddp::world_size());
  const int64_t rank = options.rank().value_or(ddp::rank());
  TORCH_CHECK(world_size >= 1,
              "ddp::ShardOptions: world size must be at least 1, got ",
              world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "ddp::ShardOptions: rank ", rank,
              " is outside [0, ", world_size, ")");
  return {rank, world_size};
}

} // namespace detail
} // namespace ddp
