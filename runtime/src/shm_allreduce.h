// Gradient all-reduce through shared memory, for ranks on one host.
//
// Gloo moves CPU tensors through TCP sockets even between processes of one
// machine: every byte is copied into and out of the kernel on both sides.
// When every rank can map the same POSIX shared-memory segment, the
// DistributedDataParallel buckets live in it instead (each rank its own
// region) and an all-reduce is two barriers around one pass: rank r sums
// its share of every rank's region, in rank order, and writes the result
// back into every region. Nothing is copied through the kernel; every rank
// ends with the same bits, as with Gloo.

#pragma once

#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>

namespace ddp {
namespace detail {

class SharedMemoryGroup {
public:
  /// Collective over `group`: a segment of `bytes_per_rank` bytes per rank,
  /// mapped by every rank. nullptr on every rank when one of them cannot map
  /// it (another host, /dev/shm too small, no shared memory): the caller
  /// then uses the process group. The segment's name is removed as soon as
  /// every rank has it open, so nothing is left behind when a rank dies.
  static std::shared_ptr<SharedMemoryGroup>
  create(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
         int64_t bytes_per_rank, std::chrono::milliseconds timeout);

  ~SharedMemoryGroup();
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  SharedMemoryGroup& operator=(const SharedMemoryGroup&) = delete;

  /// This rank's region: 64-byte aligned, `bytes_per_rank` long.
  void* local_region() const { return region(rank_); }

  /// Collective: the `numel` elements of `dtype` at byte `offset` of every
  /// rank's region become their sum over the ranks (added in rank order),
  /// the first `averaged` of them divided by the world size. Throws when a
  /// peer does not arrive within the timeout.
  void allreduce(int64_t offset, int64_t numel, int64_t averaged,
                 c10::ScalarType dtype);

  /// Collective: every rank's `numel` elements at `offset` become rank
  /// `root`'s, the first `averaged` of them divided by `divisor` (the same
  /// division on every rank, so every region ends with the same bits). The
  /// last step of a hierarchical all-reduce: `root` holds the sum over every
  /// host.
  void broadcast(int64_t offset, int64_t numel, int root, int64_t averaged,
                 int64_t divisor, c10::ScalarType dtype);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

private:
  SharedMemoryGroup(void* base, size_t size, int rank, int world_size,
                    int64_t bytes_per_rank, std::chrono::milliseconds timeout);
  void* region(int rank) const;
  void barrier(const char* where);
  /// [begin, end) of `numel` elements that this rank reduces or copies.
  std::pair<int64_t, int64_t> share(int64_t numel, c10::ScalarType dtype) const;

  void* base_;
  size_t size_;
  int rank_;
  int world_size_;
  int64_t bytes_per_rank_;
  std::chrono::milliseconds timeout_;
  uint32_t barriers_passed_ = 0;
};

/// Runs a group's all-reduces on a thread of its own, in the order they are
/// queued, so that they overlap the rest of backward as the process group's
/// asynchronous collectives do.
class SharedMemoryWorker {
public:
  explicit SharedMemoryWorker(std::shared_ptr<SharedMemoryGroup> group);
  /// Lets the thread finish what is queued, then end; never waits for it (a
  /// peer that is stuck would hold this destructor for the whole timeout).
  /// The thread keeps the group, hence the mapping, until it ends.
  ~SharedMemoryWorker();
  SharedMemoryWorker(const SharedMemoryWorker&) = delete;
  SharedMemoryWorker& operator=(const SharedMemoryWorker&) = delete;

  /// Queues SharedMemoryGroup::allreduce; the future holds its error.
  std::future<void> allreduce(int64_t offset, int64_t numel, int64_t averaged,
                              c10::ScalarType dtype);
  /// Queues any task (a hierarchical all-reduce); the future holds its error.
  std::future<void> run(std::function<void()> task);

private:
  struct Queue;
  std::shared_ptr<SharedMemoryGroup> group_;
  std::shared_ptr<Queue> queue_;
};

/// Whether DDP may use shared memory: not when DDP_SHM is "0".
bool shared_memory_allowed_by_env();

} // namespace detail
} // namespace ddp
