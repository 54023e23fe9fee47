//===- HeaderCache.h - A precompiled <torch/torch.h> kept between runs -*- C++
//-*-===//
//
// Every LibTorch translation unit starts by parsing <torch/torch.h>, most of
// the cost of a run. The cache holds a precompiled header of it (function
// bodies skipped: no matcher looks inside LibTorch) per set of compiler
// arguments, reused by every translation unit and every run. Its manifest
// holds a hash of each header it was built from, so a changed header (or a
// changed flag, which is part of the key) builds a new one.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_HEADERCACHE_H
#define DDPIFY_HEADERCACHE_H

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include <string>
#include <vector>

namespace ddpify {

class HeaderCache {
public:
  explicit HeaderCache(std::string Dir) : Dir(std::move(Dir)) {}

  /// The precompiled header Command's translation unit can be parsed with
  /// (`-include-pch`), built now when missing or stale; empty when the unit
  /// cannot use one (see startsWithTorchInclude) or it could not be built.
  /// Not thread-safe: call it before parsing in parallel.
  std::string pchFor(const clang::tooling::CompileCommand &Command);

  /// What happened, for tests and --verbose-cache: "hit", "built" or "none"
  /// per key, in order.
  const std::vector<std::string> &events() const { return Events; }

private:
  std::string build(const clang::tooling::CompileCommand &Command,
                    llvm::StringRef KeyDir);

  std::string Dir;
  llvm::StringMap<std::string> Known; ///< Key -> PCH path ("" if unusable).
  std::vector<std::string> Events;
};

/// Whether Code's first directive is `#include <torch/torch.h>`, after
/// comments, blank lines and `#include <...>` of other headers only: then
/// parsing it with that header precompiled in front means the same.
bool startsWithTorchInclude(llvm::StringRef Code);

/// The compiler arguments of Command that shape the header's meaning: the
/// source, its output and dependency-file options removed.
std::vector<std::string>
headerArguments(const clang::tooling::CompileCommand &Command);

} // namespace ddpify

#endif // DDPIFY_HEADERCACHE_H
