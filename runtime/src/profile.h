// Where a rank's time went, for DDP_PROFILE=1 (docs/runtime-core.md,
// "Where the time goes"): the runtime notes its own phases and, at exit,
// each rank prints one line. Off, every call is a test of one flag.
#pragma once

#include <chrono>

namespace ddp {
namespace detail {
namespace profile {

using Clock = std::chrono::steady_clock;

/// DDP_PROFILE is set to something other than "" or "0".
bool enabled();

/// ddp::init, around the rendezvous and the process group's creation;
/// `finished` also arranges the report at exit.
void init_started();
void init_finished(int rank, int world_size);

/// The wrapper: the first gradient of a synchronised backward pass is ready;
/// the pass is finished, of which `waited` blocked on the gradients'
/// collectives and `checked` in the sync check.
void backward_started();
void backward_finished(Clock::duration waited, Clock::duration checked);

/// A collective of the program's own (ddp::all_reduce, barrier, ...).
void collective(Clock::duration took);

/// Times a collective of the program's own while it lives.
class CollectiveTimer {
public:
  CollectiveTimer()
      : on_(enabled()), start_(on_ ? Clock::now() : Clock::time_point()) {}
  ~CollectiveTimer() {
    if (on_) {
      collective(Clock::now() - start_);
    }
  }
  CollectiveTimer(const CollectiveTimer&) = delete;
  CollectiveTimer& operator=(const CollectiveTimer&) = delete;

private:
  bool on_;
  Clock::time_point start_;
};

} // namespace profile
} // namespace detail
} // namespace ddp
