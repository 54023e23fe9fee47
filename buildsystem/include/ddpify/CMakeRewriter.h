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

#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace ddpify {

/// One argument of a command, as written.
struct CMakeArgument {
  enum ArgKind { Unquoted, Quoted, Bracket } Kind = Unquoted;
  unsigned Offset = 0; ///< Of the argument's first character (a quote, ...).
  unsigned Length = 0; ///< Of the whole argument, quotes and brackets included.
  std::string Value;   ///< Without quotes or brackets; escapes kept.
};

/// A command invocation `name(args)`, possibly spanning lines.
struct CMakeCommand {
  std::string Name;     ///< Lower-case (CMake command names ignore case).
  unsigned Offset = 0;  ///< Of the name.
  unsigned Close = 0;   ///< Of the closing parenthesis.
  unsigned LineEnd = 0; ///< Where the line of `)` ends (before its newline),
                        ///< after any trailing comment.
  unsigned Line = 0;    ///< 1-based line of the name.
  /// Arguments in order; parentheses nested in the argument list (`if((a))`)
  /// are not arguments.
  std::vector<CMakeArgument> Args;
};

/// The commands of a CMake file, or an error naming the line where it stops
/// being CMake (an unterminated argument or command, a stray character).
llvm::Expected<std::vector<CMakeCommand>> parseCMake(llvm::StringRef Text);

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
