#pragma once

// Uneven steps (ddp::join) and desyncs named in seconds: the process's
// sequence of job-wide collectives, waits in slices that publish where this
// rank waits once a wait is slow, and the small header collective that leads
// every synchronised backward pass while a rank has joined
// (docs/runtime-ddp.md, "Uneven steps" and "Desyncs").
//
// The fast path (every rank stepping, no wait longer than a slice) costs a
// counter increment per collective and one element per bucket: nothing
// reaches the store until a wait has lasted kPublishAfter.

#include <ddp/distributed.h>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdint>
#include <functional>
#include <future>
#include <string>

namespace ddp {
namespace detail {

/// One job-wide collective as this rank reports it. Every rank begins the
/// same collectives in the same order, so equal `seq` means the same one.
struct Position {
  uint64_t seq = 0;
  std::string what; ///< "gradient all-reduce", "sync check", "ddp::barrier"
  int64_t wrapper = -1;
  int64_t step = -1; ///< the wrapper's synchronised backward passes so far
};

/// "the gradient all-reduce of wrapper 2 at step 1197".
std::string describe_position(const Position& at);

/// Counts a job-wide collective (one that every rank makes) and returns its
/// place. Collectives of some ranks only (a host's leaders) are not counted.
Position begin_collective(const char* what, int64_t wrapper = -1,
                          int64_t step = -1);

/// A desync or a failed join, already named with every rank's position:
/// rethrown as it is, never wrapped in another message.
class PositionsError : public CollectiveError {
public:
  using CollectiveError::CollectiveError;
};

/// Waits for a collective in slices: after kPublishAfter this rank's
/// position goes to the store (a joined peer reads it to take part), and
/// after DDP_DESYNC_SECONDS peers waiting in another collective end the job
/// with every rank's position. Errors of the collective itself propagate.
void wait_collective(const c10::intrusive_ptr<c10d::Work>& work,
                     const Position& at);
void wait_collective(std::future<void>& done, const Position& at);

/// While one lives, the calling thread blocks in the collective `at` outside
/// wait_collective (a shared-memory all-reduce run inline): its slices call
/// on_slow_wait().
class BlockingCollective {
public:
  explicit BlockingCollective(const Position& at);
  ~BlockingCollective();
  BlockingCollective(const BlockingCollective&) = delete;
  BlockingCollective& operator=(const BlockingCollective&) = delete;
};
/// Called by waits that slice on their own (the shared-memory barrier) once
/// per slice; no-op on a thread outside a BlockingCollective.
void on_slow_wait(std::chrono::steady_clock::duration waited);
/// Called by those waits when a peer is gone: throws the desync that peer
/// ended the job for, if it did.
void on_peer_failure();

/// Whether a peer has joined (this rank still stepping): each synchronised
/// backward pass then starts with announce_backward().
bool peers_joined();
/// Before a wrapper's synchronised backward pass while peers_joined(): the
/// header all-reduce that tells the joined ranks what to take part in.
/// Returns the rank whose buffers the pass broadcasts (the lowest stepping).
int announce_backward(int64_t wrapper, int64_t step);
/// Before a collective of the program's own (ddp::all_reduce, ...): an error
/// on every rank, naming it, while a peer has joined.
void announce_program_collective(const char* what);
/// After a bucket's all-reduce: how many ranks took that step.
void saw_stepping_ranks(int stepping, int world_size);
/// One more backward pass this rank synchronised with gradients of its own.
void count_own_backward();

/// What ddp::join() needs from the wrappers (data_parallel.cpp).
struct JoinParticipants {
  /// Takes part, with no gradients, in the synchronised backward pass
  /// `step` of wrapper `wrapper` (buffers from `root`); false: no such
  /// wrapper on this rank.
  std::function<bool(int64_t wrapper, int64_t step, int root)> shadow_backward;
  /// Every live wrapper's parameters and buffers become `root`'s.
  std::function<void(int root)> take_state_of;
};
void set_join_participants(JoinParticipants participants);

/// The job's store (distributed.cpp); null without a process group.
c10::intrusive_ptr<c10d::Store> job_store();

} // namespace detail
} // namespace ddp
