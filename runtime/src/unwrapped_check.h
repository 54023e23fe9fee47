#pragma once

// Internal: the run-time safety net for training that is not data parallel
// (docs/runtime-ddp.md, "Training without a wrapper"). Under a launcher, a
// process that runs backward passes without ever constructing an active
// DistributedDataParallel (or calling ddp::distribute) gets one warning on
// rank 0: at the first batch a ddp data loader hands out after a backward
// pass, or else at exit. DDP_WARN_UNWRAPPED=0 turns it off.

namespace ddp {
namespace detail {

/// Called by ddp::init once the process group of `world_size` > 1 ranks
/// exists: starts watching for backward passes (a RecordFunction callback on
/// autograd nodes, removed again as soon as a wrapper exists or the warning
/// is given) and registers the check at exit.
void arm_unwrapped_check(int rank, int world_size);

/// Called by every wrapper that communicates (world size > 1): the process
/// is data parallel, the check is off for good.
void note_wrapper_constructed();

// check_unwrapped_training(), called by ddp::DistributedSampler for every
// batch request, is declared in <ddp/data.h>.

} // namespace detail
} // namespace ddp
