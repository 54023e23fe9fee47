//===- CompilerIncludes.h - the database compiler's include folders -*- C++
//-*-===//
//
// A unit built by g++ may include a header that only GCC ships (<omp.h> under
// -fopenmp, which Debian's LibTorch headers include): Clang's own builtin
// headers lack it. As clangd's --query-driver does, ddpify then asks the
// database's compiler for the folders it searches (`CC -E -v -x c++ -`).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_TOOL_COMPILERINCLUDES_H
#define DDPIFY_TOOL_COMPILERINCLUDES_H

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/StringRef.h"
#include <string>
#include <vector>

namespace ddpify {

/// Whether the compiler named by a command's first argument is GCC's driver
/// (g++, gcc, c++, cc, x86_64-linux-gnu-g++-12, ...), not Clang's.
bool isGccLikeCompiler(llvm::StringRef Compiler);

/// The `#include <...>` search folders of Compiler, in its order; empty when
/// it cannot be run or says nothing. Asked once per compiler per process.
std::vector<std::string> compilerIncludeFolders(llvm::StringRef Compiler);

/// Appends `-idirafter <folder>` for each include folder of each command's
/// GCC-like compiler (after every folder of Clang's own); returns the
/// folders added, once each, for a note. Commands of other compilers stay.
std::vector<std::string> addCompilerIncludeFolders(
    std::vector<clang::tooling::CompileCommand> &Commands);

} // namespace ddpify

#endif // DDPIFY_TOOL_COMPILERINCLUDES_H
