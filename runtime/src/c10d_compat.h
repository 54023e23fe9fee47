// The one place where the ddp runtime meets the differences between the c10d
// APIs of LibTorch 1.13 and 2.x. Every other source uses what is declared
// here and never tests TORCH_VERSION_* itself; both LibTorch builds of the
// test suite (labels torch1 and torch2) compile and run every branch that
// their version takes.
//
//   version      what differs
//   1.13         the backends (ProcessGroupGloo, ProcessGroupNCCL) are
//                c10d::ProcessGroups themselves
//   2.0 .. 2.5   c10d::ProcessGroup dispatches by device type to
//                c10d::Backend objects; built from (store, rank, size,
//                ProcessGroup::Options)
//   2.6 ..       ProcessGroup::Options is gone: built from (store, rank,
//                size), told its default backend
//   2.0 ..       BatchNormImplBase::pretty_print is defined in its header
//                (1.13 only declares it and does not export the definition)
//   1.13         TCPStoreOptions has no masterListenFd: rank 0's store is
//                bound to MASTER_ADDR through a StoreListenScope
//                (store_listen.cpp, the only other source that tests the
//                version); 2.x is given a socket listening there
//
// c10d::Work, the store options and the NCCL options (a timeout) are spelled
// the same in 1.13 and 2.x; c10d::Work is used directly.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include "store_listen.h"

#if defined(DDP_WITH_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <stdexcept>
#include <string>

#define DDP_TORCH_AT_LEAST(major, minor)                                       \
  (TORCH_VERSION_MAJOR > (major) ||                                            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// 1 where this runtime must define BatchNormImplBase<D>::pretty_print itself
// (see sync_batch_norm.cpp).
#define DDP_COMPAT_DEFINE_BATCHNORM_PRETTY_PRINT (!DDP_TORCH_AT_LEAST(2, 0))

namespace ddp {
namespace detail {
namespace compat {

/// Rank 0's TCPStore server for clients of `host`, listening on
/// `listen_host` only (store_listen.h), or on every interface when it is
/// empty.
inline c10::intrusive_ptr<c10d::TCPStore>
make_server_store(const std::string& host, const std::string& listen_host,
                  c10d::TCPStoreOptions options) {
  if (listen_host.empty()) {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  }
#if DDP_TORCH_AT_LEAST(2, 0)
  std::string error;
  const int fd = store_socket(listen_host, options.port, error);
  if (fd < 0) {
    throw std::runtime_error(error);
  }
  options.masterListenFd = fd; // the store owns it from here
  return c10::make_intrusive<c10d::TCPStore>(host, options);
#else
  const StoreListenScope scope(listen_host);
  return c10::make_intrusive<c10d::TCPStore>(host, options);
#endif
}

/// What ProcessGroupGloo / ProcessGroupNCCL derive from.
#if DDP_TORCH_AT_LEAST(2, 0)
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif
using BackendPtr = c10::intrusive_ptr<Backend>;

/// The process group that collectives go through, over `backend` (a Gloo or
/// NCCL backend of this world). In 2.x the group dispatches by the device
/// of the tensors: NCCL serves CUDA tensors; Gloo serves CPU tensors and, so
/// that ranks sharing a GPU over Gloo work as in 1.13, CUDA tensors too.
inline c10::intrusive_ptr<c10d::ProcessGroup>
make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                   int world_size, bool nccl, const BackendPtr& backend,
                   std::chrono::milliseconds timeout) {
#if DDP_TORCH_AT_LEAST(2, 0)
  const auto type = nccl ? c10d::ProcessGroup::BackendType::NCCL
                         : c10d::ProcessGroup::BackendType::GLOO;
#if DDP_TORCH_AT_LEAST(2, 6)
  (void)timeout; // each backend carries its own
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
  group->setDefaultBackend(type);
#else
  auto group = c10::make_intrusive<c10d::ProcessGroup>(
      store, rank, world_size,
      c10::make_intrusive<c10d::ProcessGroup::Options>(nccl ? "nccl" : "gloo",
                                                       timeout));
#endif
  if (nccl) {
    group->setBackend(c10::DeviceType::CUDA, type, backend);
  } else {
    group->setBackend(c10::DeviceType::CPU, type, backend);
    group->setBackend(c10::DeviceType::CUDA, type, backend);
  }
  return group;
#else
  (void)store, (void)rank, (void)world_size, (void)nccl, (void)timeout;
  return backend;
#endif
}

#if defined(DDP_WITH_NCCL)
/// Options of a NCCL backend whose collectives time out after `timeout`.
inline c10::intrusive_ptr<c10d::ProcessGroupNCCL::Options>
nccl_options(std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return options;
}
#endif

} // namespace compat
} // namespace detail
} // namespace ddp
