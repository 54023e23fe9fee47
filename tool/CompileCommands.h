//===- CompileCommands.h - a database's commands, adjusted ------*- C++ -*-===//
//
// What ddpify does to the argument lists a compilation database gives before
// Clang parses a unit with them: read them as Clang's driver does, drop what
// only makes a parse stricter or what Clang refuses, retry at C++20. The
// argument lists are a user's build's, so this is fuzzed
// (fuzz/compile_commands.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_TOOL_COMPILECOMMANDS_H
#define DDPIFY_TOOL_COMPILECOMMANDS_H

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Option/ArgList.h"
#include <set>
#include <string>
#include <vector>

namespace ddpify {

/// Whether Arguments name C++20 or a later standard (the last -std= before
/// any `--` wins):
/// LibTorch 1.13's headers do not parse with Clang in that mode.
bool usesCxx20OrLater(const std::vector<std::string> &Arguments);

/// CommandLine's arguments (its compiler left out) as Clang's driver reads
/// them, in clang-cl's mode where the compiler is clang-cl. The arguments
/// point into CommandLine.
llvm::opt::InputArgList
driverArguments(const std::vector<std::string> &CommandLine);

/// Makes a compile command parse as leniently as the project's compiler
/// builds it: ddpify is not the compiler. Warning options go (-Werror and
/// friends can only make a parse stricter; -Wno-... stay, they only relax)
/// and -w silences the rest; narrowing inside braces, an error in Clang but
/// a warning in GCC, is not an error. Options Clang's driver does not know
/// or refuses (GCC's -fconcepts, -fno-gnu-unique, ...) go too, as clangd
/// drops them; they are added to Dropped.
std::vector<std::string>
parseAsTheCompilerDoes(const std::vector<std::string> &CommandLine,
                       std::set<std::string> &Dropped);

/// Whether Command names its compiler first, as every command ddpify parses
/// with must: a database entry with an empty command or argument list names
/// none, nor does the command Clang infers from it for a header (`-x
/// c++-header -- h.h`).
bool namesCompiler(const clang::tooling::CompileCommand &Command);

/// What ddpify adds to each command of the database before a parse.
struct CommandAdditions {
  std::vector<std::string> Before; ///< --extra-arg-before: after the compiler.
  std::vector<std::string> After;  ///< --extra-arg: before any `--`.
  std::string ResourceDir;         ///< Clang's builtin headers.
  /// The runtime's headers (<ddp/ddp.h>), -idirafter; empty for none.
  std::string RuntimeIncludeDir;
};

/// The arguments ddpify parses Command's unit with: Additions in, then made
/// lenient (parseAsTheCompilerDoes, which adds what it drops to Dropped).
/// Command must name its compiler (namesCompiler), which stays first.
std::vector<std::string>
argumentsForParse(const clang::tooling::CompileCommand &Command,
                  const CommandAdditions &Additions,
                  std::set<std::string> &Dropped);

/// The commands of a unit at C++20 (GNU dialect if it was), when they name a
/// C++ standard before C++20 or none (Clang's default is gnu++17); From and
/// To say which. Empty when there is no earlier standard to retry from.
std::vector<clang::tooling::CompileCommand>
atCxx20(std::vector<clang::tooling::CompileCommand> Commands, std::string &From,
        std::string &To);

} // namespace ddpify

#endif // DDPIFY_TOOL_COMPILECOMMANDS_H
