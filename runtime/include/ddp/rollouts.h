#pragma once

// Per-rank random streams for reinforcement-learning rollouts (ddpify
// migrate --rollouts-per-rank, rule R16).
//
// A program that learns from experience it collects itself (an agent in a
// simulated environment) gains nothing from N ranks that collect the same
// episodes. The usual distributed recipe gives each rank its own episodes and
// averages the gradients: one optimizer step then learns from N times the
// experience. Right before the rollout loop:
//
//   ddp::reseed_per_rank();      // torch's generators (CPU and CUDA)
//   ddp::reseed_per_rank(rng);   // a standard engine the rollouts draw from
//   for (int episode = 0; ...) { ... loss.backward(); optimizer.step(); }
//
// Rank 0 keeps its streams as they are, so with one process (or rank 0 of N)
// the program draws exactly what it drew before; rank r > 0 continues from a
// seed derived from the stream's own seed and r, the same on every run. The
// model's parameters stay identical on every rank: the wrapper broadcasts
// rank 0's at construction and averages every gradient.

#include <ddp/distributed.h>

#include <cstdint>

namespace ddp {

namespace detail {
/// This process's rank, 0 when it runs alone (before ddp::init too: the
/// launcher's RANK).
int rollout_rank();
/// The seed rank r > 0 continues from, given a stream's seed.
uint64_t rank_seed(uint64_t seed, int rank);
} // namespace detail

/// Reseeds torch's default generators (CPU and every CUDA device) on ranks
/// other than 0; nothing on rank 0 or without a launcher.
void reseed_per_rank();

/// Reseeds a standard random engine (std::mt19937, std::default_random_engine,
/// ...) on ranks other than 0 from its next value and the rank.
template <typename Engine> void reseed_per_rank(Engine& engine) {
  const int rank = detail::rollout_rank();
  if (rank > 0) {
    const auto next = static_cast<uint64_t>(engine());
    engine.seed(static_cast<typename Engine::result_type>(
        detail::rank_seed(next, rank)));
  }
}

/// A seed drawn at run time for one rank's own episodes (R13 under
/// --rollouts-per-rank): with one process `seed` itself (the program draws
/// exactly what it drew before); with several, the n-th call's value of a
/// stream derived from the job seed on rank 0 and, on rank r > 0, a seed
/// derived from that and r: each rank plays its own episodes. Its calls count
/// apart from ddp::shared_seed's, so ranks may call it unequally often (a
/// reset per episode of uneven length) without moving shared_seed's values.
template <typename T> T rollout_seed(T seed) {
  static_assert(std::is_integral<T>::value && !std::is_same<T, bool>::value,
                "ddp::rollout_seed: a seed is an integer");
  const auto shared = static_cast<uint64_t>(
      detail::rollout_seed_bits(static_cast<uint64_t>(seed)));
  const int rank = detail::rollout_rank();
  return static_cast<T>(rank > 0 ? detail::rank_seed(shared, rank) : shared);
}

} // namespace ddp
