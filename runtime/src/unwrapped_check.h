#pragma once

// Internal: the run-time safety nets for training that is not data parallel
// (docs/runtime-ddp.md, "Safety nets"). Under a launcher (world size > 1):
// - a process whose optimizer steps a parameter that no
//   DistributedDataParallel (nor ddp::distribute) covers ends with one line
//   naming that parameter (DDP_ALLOW_UNWRAPPED=1: one warning on rank 0
//   instead);
// - a wrapped parameter replaced under its wrapper (to(dtype) or to(device)
//   after the wrap) ends the job with one line naming it;
// - the wrappers compare their parameters across ranks at their end
//   (destruction, ddp::shutdown, exit) and every
//   DistributedDataParallelOptions::check_sync_every steps.

#include <c10/util/Optional.h>

#include <string>

namespace c10 {
struct TensorImpl;
} // namespace c10
namespace torch {
namespace autograd {
struct Node;
} // namespace autograd
} // namespace torch

namespace ddp {
namespace detail {

/// Called by ddp::init once the process group of `world_size` > 1 ranks
/// exists: watches backward passes (a RecordFunction callback on autograd
/// nodes that looks at the first node of each pass) and registers the check
/// at exit.
void arm_unwrapped_check(int rank, int world_size);

/// Called by every wrapper that communicates (world size > 1).
void note_wrapper_constructed();

// check_unwrapped_training(), called by ddp::DistributedSampler for every
// batch request, is declared in <ddp/data.h>.

// From data_parallel.cpp:

/// Whether `node` is a gradient accumulator that a live wrapper hooked.
bool is_wrapped_accumulator(const torch::autograd::Node* node);

/// The one-line error when `param` is a parameter of a live wrapper that was
/// replaced under it (its accumulator, dtype, device or size changed).
c10::optional<std::string>
wrapped_parameter_replaced(const c10::TensorImpl* param);

/// The end-of-training sync check of every live wrapper, in the order they
/// were built (ddp::shutdown, exit).
void check_live_wrappers_at_end();

} // namespace detail
} // namespace ddp
