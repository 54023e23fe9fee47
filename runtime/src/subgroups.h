#pragma once

// Process groups of some ranks of the job, and which ranks share a host: what
// the hierarchical all-reduce of DistributedDataParallel builds on.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp {
namespace detail {

/// A Gloo process group of the global `ranks` (ascending) over the job's
/// store, under a prefix of its own: `name`, the same on every member and
/// never used twice in a job. nullptr on a rank that is not a member. Blocks
/// until every member created it (within the job's timeout). Defined in
/// distributed.cpp.
c10::intrusive_ptr<c10d::ProcessGroup>
new_gloo_subgroup(const std::vector<int>& ranks, const std::string& name);

/// What tells this rank's host from the others as far as shared memory
/// goes: the host name and the device of /dev/shm (two containers of one
/// machine with a /dev/shm each are two hosts here).
int64_t shared_memory_host_key();

} // namespace detail
} // namespace ddp
