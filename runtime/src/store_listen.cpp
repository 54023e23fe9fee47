// Rank 0's store on MASTER_ADDR only: see store_listen.h.

#include "store_listen.h"

#include "c10d_compat.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ddp {
namespace detail {
namespace {

thread_local const char* t_listen_host = nullptr;

} // namespace

int store_socket(const std::string& host, int port, std::string& error) {
  const ListeningSocket socket = listen_on(host, port, SOMAXCONN);
  if (socket.resolve_error != 0) {
    error =
        "cannot resolve " + host + ": " + ::gai_strerror(socket.resolve_error);
  } else if (socket.fd < 0) {
    error =
        "cannot listen on " + host + " port " + std::to_string(port) + ": " +
        std::strerror(socket.error) +
        (socket.error == EADDRNOTAVAIL ? " (not an address of this host)" : "");
  }
  return socket.fd;
}

StoreListenScope::StoreListenScope(const std::string& host)
    : previous_(t_listen_host) {
  t_listen_host = host.c_str();
}

StoreListenScope::~StoreListenScope() { t_listen_host = previous_; }

const char* store_listen_host() { return t_listen_host; }

} // namespace detail
} // namespace ddp

#if !DDP_TORCH_AT_LEAST(2, 0)
// LibTorch 1.13's server socket (c10d/socket.cpp, SocketListenOp) asks for
// the wildcard addresses of its port, IPv6 (dual-stack "::") first, then
// IPv4. Inside a StoreListenScope, on its thread, the passive query is
// answered with the scope's host instead, in whatever family the host has:
// the first (IPv6) attempt binds an IPv4 MASTER_ADDR as IPv4 at once. Asked
// in the family of the query, an IPv4 host has no IPv6 address, and 1.13
// logs the failed look-up as a c10d warning on every start ("The local IPv6
// network addresses cannot be retrieved") before it falls back to IPv4.
// Everything else goes to the C library unchanged.
extern "C" int getaddrinfo(const char* node, const char* service,
                           const struct addrinfo* hints,
                           struct addrinfo** result) {
  using Function = int (*)(const char*, const char*, const struct addrinfo*,
                           struct addrinfo**);
  static const auto libc_getaddrinfo =
      reinterpret_cast<Function>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  if (libc_getaddrinfo == nullptr) {
    errno = ENOSYS;
    return EAI_SYSTEM;
  }
  const char* host = ddp::detail::store_listen_host();
  if (node == nullptr && host != nullptr && hints != nullptr &&
      (hints->ai_flags & AI_PASSIVE) != 0) {
    struct addrinfo narrowed = *hints;
    narrowed.ai_flags &= ~AI_PASSIVE;
    narrowed.ai_family = AF_UNSPEC;
    return libc_getaddrinfo(host, service, &narrowed, result);
  }
  return libc_getaddrinfo(node, service, hints, result);
}
#endif
