#pragma once

// Checkpoints read back on hosts without a shared disk.
//
// A migrated program saves on the main process only (rank 0's working
// directory); when every rank then reads the file back (a resume, a reload
// of the best model, an evaluation after training), the other hosts have no
// such file. ddp::load reads it on rank 0 and hands its bytes to every rank,
// which loads them with torch::load as the original did:
//
//   if (ddp::exists_on_main(path)) ddp::load(model, path);
//
// Modules, optimizers, tensors: whatever torch::load reads from a stream.
// Without a launcher both are the plain calls.

#include <ddp/distributed.h>

#include <torch/serialize.h>

#include <sstream>
#include <string>
#include <utility>

namespace ddp {

namespace detail {
/// The bytes of `path` as rank 0 reads them, on every rank (a collective).
/// Every rank throws the same error when rank 0 cannot read the file.
std::string file_bytes_from_main(const std::string& path);
} // namespace detail

/// Whether `path` exists on rank 0 (a collective): every rank takes the
/// branch rank 0 takes. Without a launcher: whether it exists here.
bool exists_on_main(const std::string& path);

/// torch::load(value, path) with rank 0's file, on every rank.
template <typename Value, typename... LoadArgs>
void load(Value& value, const std::string& path, LoadArgs&&... args) {
  if (!ddp::is_distributed()) {
    torch::load(value, path, std::forward<LoadArgs>(args)...);
    return;
  }
  std::istringstream stream(detail::file_bytes_from_main(path));
  torch::load(value, stream, std::forward<LoadArgs>(args)...);
}

/// The same for a TORCH_MODULE holder or a std::shared_ptr held by value
/// (torch::load takes those by value too).
template <typename Value, typename... LoadArgs>
void load(const Value& value, const std::string& path, LoadArgs&&... args) {
  auto copy = value;
  ddp::load(copy, path, std::forward<LoadArgs>(args)...);
}

} // namespace ddp
