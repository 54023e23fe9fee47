// What a host name means on this host, and listening there; shared by the
// runtime and ddprun
// (LibTorch-free, so ddprun compiles it too).
#pragma once

#include <string>

namespace ddp {
namespace detail {

/// Whether `host` is a name (not an address, not "localhost") whose every
/// address on this host is a loopback one: a host name that /etc/hosts maps
/// to 127.0.1.1, as Debian does, while other hosts reach it by another.
bool name_on_loopback(const std::string& host);

/// A TCP socket (close-on-exec, SO_REUSEADDR) listening on `port` at the
/// first address of `host` that binds, or on every IPv4 interface when
/// `host` is empty.
struct ListeningSocket {
  int fd = -1;           ///< -1: none could be bound
  int resolve_error = 0; ///< getaddrinfo's code when `host` did not resolve
  int error = 0;         ///< errno of the last address that did not bind
};
ListeningSocket listen_on(const std::string& host, int port, int backlog);

/// Waits until something listens on host:port (a TCP connect succeeds,
/// probing every few milliseconds), at most `timeout_ms`; returns at once
/// on any other outcome than a refused connection. c10d's TCPStore client
/// sleeps a whole second after a refused connect: a rank that starts before
/// rank 0's store listens would lose that second.
void wait_until_listening(const std::string& host, int port, long timeout_ms);

} // namespace detail
} // namespace ddp
