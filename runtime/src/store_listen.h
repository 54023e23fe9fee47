// Rank 0's rendezvous store listens on MASTER_ADDR only, not on every
// interface of its host: what other hosts can reach is what the job needs.
#pragma once

#include "host_address.h"

#include <string>

namespace ddp {
namespace detail {

/// The store's listening socket on `host` (listen_on), or -1 and `error`
/// (a line) when none can be bound.
int store_socket(const std::string& host, int port, std::string& error);

/// While one lives, LibTorch 1.13's TCPStore server, constructed on this
/// thread, listens on `host` instead of on every interface. 1.13 has no
/// masterListenFd: its server asks getaddrinfo(nullptr, port, AI_PASSIVE)
/// for the wildcard addresses, which this runtime answers with `host`'s
/// addresses on this thread alone while the guard lives (store_listen.cpp).
/// With 2.x it does nothing (the store gets a socket of store_socket()).
class StoreListenScope {
public:
  explicit StoreListenScope(const std::string& host);
  ~StoreListenScope();
  StoreListenScope(const StoreListenScope&) = delete;
  StoreListenScope& operator=(const StoreListenScope&) = delete;

private:
  const char* previous_;
};

/// The host the current thread's StoreListenScope names (nullptr: none).
const char* store_listen_host();

} // namespace detail
} // namespace ddp
