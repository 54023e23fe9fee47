//===- FuzzFiles.h - several files in one fuzz input ------------*- C++ -*-===//
//
// A target whose code reads several files (a File API reply, a compilation
// database and its response files) takes them from one input, separated by
// a line `--`, so each seed is readable and the fuzzer mutates every file.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FUZZ_FUZZFILES_H
#define DDPIFY_FUZZ_FUZZFILES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

/// The files of Input, in order (at least one, maybe empty).
inline llvm::SmallVector<llvm::StringRef, 8>
splitFuzzFiles(llvm::StringRef Input) {
  llvm::SmallVector<llvm::StringRef, 8> Files;
  Input.split(Files, "\n--\n");
  return Files;
}

#endif // DDPIFY_FUZZ_FUZZFILES_H
