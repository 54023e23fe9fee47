// ddp::reseed_per_rank (rollouts.h).

#include <ddp/rollouts.h>

#include <ddp/distributed.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace ddp {
namespace detail {

int rollout_rank() { return ddp::rank(); }

uint64_t rank_seed(uint64_t seed, int rank) {
  // splitmix64's increment and finaliser: seeds of neighbouring ranks land
  // far apart in the generator's state space.
  uint64_t z = seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

} // namespace detail

void reseed_per_rank() {
  const int rank = detail::rollout_rank();
  if (rank == 0) {
    return;
  }
  // torch::manual_seed seeds the CPU generator and every CUDA device's.
  const uint64_t seed = at::detail::getDefaultCPUGenerator().current_seed();
  torch::manual_seed(detail::rank_seed(seed, rank));
}

} // namespace ddp
