//===- CMakeLexer.h - the CMake language, read as written -------*- C++ -*-===//
//
// R10 reads the CMake files it edits with a small lexer of the CMake language
// (cmake-language(7)): comments, bracket and quoted arguments, multi-line
// commands, never line regexes. Its input is any file of a user's project, so
// it is fuzzed (fuzz/cmake_lexer.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_CMAKELEXER_H
#define DDPIFY_CMAKELEXER_H

#include "llvm/ADT/StringRef.h"
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

/// From just after a command's `)` at \p From: past spaces and comments up
/// to the end of the line (a bracket comment may run over several lines);
/// Text's size when a comment there is never closed.
unsigned cmakeLineEnd(llvm::StringRef Text, unsigned From);

} // namespace ddpify

#endif // DDPIFY_CMAKELEXER_H
