//===- CMakeRewriter.h - R10: CMakeLists.txt edits --------------*- C++ -*-===//
//
// R10 links the targets whose sources changed to the ddp runtime:
// `find_package(ddpify REQUIRED)` once, `ddpify::runtime` in each target's
// target_link_libraries (in the signature the target already uses). Which
// target compiles a source, and where it is defined, comes from CMake's File
// API in the build folder (CMakeFileApi.h); the files edited are read with a
// small lexer of the CMake language (comments, bracket and quoted arguments,
// multi-line commands), never with line regexes.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_CMAKEREWRITER_H
#define DDPIFY_CMAKEREWRITER_H

#include "ddpify/CMakeLexer.h"
#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace ddpify {

/// What R10 does to a project.
struct CMakeMigration {
  /// Edits of CMakeLists.txt files (one per logical edit; insertions at the
  /// same offset already merged).
  std::vector<clang::tooling::Replacement> Edits;
  /// A finding per logical edit (made already, in Edits: the report counts
  /// them) and the report items (RuleId "R10", ids in
  /// docs/report.md).
  FindingList Findings;
  /// Lines for the report's end: no build folder and no CMakeLists.txt (the
  /// flags to add by hand).
  std::vector<std::string> Notes;
};

/// R10 over \p ChangedFiles (absolute real paths of the files that get
/// edits): the targets of the CMake build in \p BuildDir compiling one of
/// them, or a source that includes a changed header (directly or not), link
/// the runtime. Only CMake files under \p Root are edited.
CMakeMigration migrateCMake(llvm::ArrayRef<std::string> ChangedFiles,
                            llvm::StringRef Root, llvm::StringRef BuildDir);

} // namespace ddpify

#endif // DDPIFY_CMAKEREWRITER_H
