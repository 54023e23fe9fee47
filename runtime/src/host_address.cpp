#include "host_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

namespace ddp {
namespace detail {

bool name_on_loopback(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  if (host.empty() || host == "localhost" ||
      ::inet_pton(AF_INET, host.c_str(), address) == 1 ||
      ::inet_pton(AF_INET6, host.c_str(), address) == 1) {
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 ||
      found == nullptr) {
    return false;
  }
  bool loopback = true;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback = loopback && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  return loopback;
}

ListeningSocket listen_on(const std::string& host, int port, int backlog) {
  ListeningSocket result;
  addrinfo hints{};
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (host.empty() ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  result.resolve_error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                       service.c_str(), &hints, &found);
  if (result.resolve_error != 0 || found == nullptr) {
    result.resolve_error =
        result.resolve_error != 0 ? result.resolve_error : EAI_NONAME;
    return result;
  }
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int yes = 1;
    if (fd >= 0 &&
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes)) == 0 &&
        ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd, backlog) == 0) {
      result.fd = fd;
      break;
    }
    result.error = errno;
    if (fd >= 0) {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  return result;
}

void wait_until_listening(const std::string& host, int port, long timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return; // TCPStore names the problem
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    bool refused = false;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        continue;
      }
      const int result = ::connect(fd, a->ai_addr, a->ai_addrlen);
      const int error = errno;
      ::close(fd);
      if (result == 0) {
        ::freeaddrinfo(found);
        return;
      }
      refused = refused || error == ECONNREFUSED;
    }
    if (!refused || std::chrono::steady_clock::now() + pause > deadline) {
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
}

} // namespace detail
} // namespace ddp
