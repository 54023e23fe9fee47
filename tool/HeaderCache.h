//===- HeaderCache.h - Precompiled LibTorch headers kept between runs -*- C++
//-*-===//
//
// Every LibTorch translation unit starts by parsing LibTorch's headers, most
// of the cost of a run. The cache holds a precompiled header (function bodies
// skipped: no matcher looks inside LibTorch) per set of compiler arguments and
// per distinct include prefix -- the system headers a unit includes before
// anything else, read on through the project headers it includes first --
// reused by every translation unit and every run. Unlike clangd's
// PrecompiledPreamble it never holds a project header: the matchers need
// those whole. Its manifest holds a hash of each header it was built from, so
// a changed header (or a changed flag, which is part of the key) builds a new
// one.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_HEADERCACHE_H
#define DDPIFY_HEADERCACHE_H

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>

namespace ddpify {

class HeaderCache {
public:
  /// Root: the project, whose headers are never precompiled. Base (as
  /// ccache's CCACHE_BASEDIR, empty for none): paths under it count as
  /// relative in a key, so checkouts of one project in other folders share
  /// a header when none of its files lies under their own folder.
  HeaderCache(std::string Dir, std::string Root, std::string Base = "")
      : Dir(std::move(Dir)), Root(std::move(Root)), Base(std::move(Base)) {}

  /// The compiler arguments that put the precompiled header of Prefix (see
  /// precompilablePrefix) in front of Command's translation unit
  /// (`-include-pch`), the header built now when missing or stale; none when
  /// Prefix is empty, it reaches a project header or it could not be built.
  /// A header built in a checkout this machine no longer has, from files
  /// whose copies under Base have the same contents, comes with a file
  /// system overlay (`-ivfsoverlay`) that reads that checkout's folder as
  /// Base. Not thread-safe: callers on several threads hold a lock around it.
  std::vector<std::string>
  argumentsFor(const clang::tooling::CompileCommand &Command,
               llvm::ArrayRef<std::string> Prefix);

  /// A unit that failed to parse with its header and was parsed again
  /// without it (an event).
  void noteUnused(llvm::StringRef Unit) {
    Events.push_back("unused by " + Unit.str() + ": parsed without it");
  }

  /// What happened, for tests and --cache-trace: "hit", "built", "none" or
  /// "refused" per key, and "unused", in order.
  const std::vector<std::string> &events() const { return Events; }

private:
  std::string pchFor(const clang::tooling::CompileCommand &Command,
                     llvm::ArrayRef<std::string> Prefix);
  /// The header under Key, whose paths are relative to KeyBase: built when
  /// missing or stale; nullopt when Key's entry was built under another
  /// base from files under it (the caller then uses a key of its own).
  std::string pchFor(const clang::tooling::CompileCommand &Command,
                     const std::vector<std::string> &Arguments,
                     llvm::ArrayRef<std::string> Prefix);
  std::optional<std::string>
  pchUnder(llvm::StringRef Key, llvm::StringRef KeyBase,
           const clang::tooling::CompileCommand &Command,
           const std::vector<std::string> &Arguments,
           llvm::ArrayRef<std::string> Prefix);
  std::string build(const clang::tooling::CompileCommand &Command,
                    std::vector<std::string> Arguments,
                    llvm::ArrayRef<std::string> Prefix, llvm::StringRef KeyDir,
                    llvm::StringRef KeyBase);

  std::string Dir;
  std::string Root;
  std::string Base;
  std::string FailureReason;          ///< Why the last build() built nothing.
  llvm::StringMap<std::string> Known; ///< Key -> PCH path ("" if unusable).
  /// PCH path -> the overlay it needs (a gone checkout's header).
  llvm::StringMap<std::string> Overlays;
  std::vector<std::string> Events;
};

/// The headers (`<h>`, or `"h"` found outside Root) that File (Code)
/// includes before anything else, in order, up to the last LibTorch header
/// (torch/, ATen/, c10/) among them; a project header included there (found
/// under Root through the includer's folder, -iquote or -I) is read on when
/// it holds only its include guard and such includes. Parsing the unit with a
/// header of exactly these lines precompiled in front means the same. Empty
/// when the unit starts otherwise (a #define, code) before any LibTorch
/// header.
std::vector<std::string>
precompilablePrefix(llvm::StringRef File, llvm::StringRef Code,
                    const clang::tooling::CompileCommand &Command,
                    llvm::StringRef Root);

/// The compiler arguments of Command that shape the header's meaning: the
/// source, its output and dependency-file options removed.
std::vector<std::string>
headerArguments(const clang::tooling::CompileCommand &Command);

/// The arguments that shape a precompiled header (headerArguments), so
/// normalised that the units of a project whose commands differ only where
/// the header cannot see it share one: warning options dropped, a -D repeated
/// with the same value dropped, and, unless \p KeepFolders, the project's own
/// include folders (under \p Root) that hold no header of \p Prefix moved to
/// \p Dropped.
std::vector<std::string>
keyArguments(const clang::tooling::CompileCommand &Command,
             llvm::StringRef Root, llvm::ArrayRef<std::string> Prefix,
             bool KeepFolders, std::vector<std::string> &Dropped);

} // namespace ddpify

#endif // DDPIFY_HEADERCACHE_H
