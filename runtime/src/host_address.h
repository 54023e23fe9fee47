// What a host name means on this host; shared by the runtime and ddprun
// (LibTorch-free, so ddprun compiles it too).
#pragma once

#include <string>

namespace ddp {
namespace detail {

/// Whether `host` is a name (not an address, not "localhost") whose every
/// address on this host is a loopback one: a host name that /etc/hosts maps
/// to 127.0.1.1, as Debian does, while other hosts reach it by another.
bool name_on_loopback(const std::string& host);

} // namespace detail
} // namespace ddp
