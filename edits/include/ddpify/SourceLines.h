//===- SourceLines.h - The lines of a file's text ---------------*- C++ -*-===//
//
// Where a line of source text starts and ends, for the passes that look at
// whole lines around an edit (the overflow formatting, the guards' widths,
// the report comments). A line's `\n` belongs to the line it ends, and a
// line ending in `\r\n` ends before its `\r`.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_SOURCELINES_H
#define DDPIFY_SOURCELINES_H

#include "llvm/ADT/StringRef.h"

namespace ddpify {

/// The start of the line holding Offset (its `\n` included); an Offset past
/// the end is the last line's.
inline size_t lineStart(llvm::StringRef Code, size_t Offset) {
  // StringRef::rfind(C, From) looks at the bytes before From only.
  size_t Newline = Code.rfind('\n', Offset);
  return Newline == llvm::StringRef::npos ? 0 : Newline + 1;
}

/// The end of the line holding Offset: its `\n` (or the `\r` of `\r\n`), or
/// the end of the text.
inline size_t lineEnd(llvm::StringRef Code, size_t Offset) {
  size_t Newline = Code.find('\n', Offset);
  if (Newline == llvm::StringRef::npos)
    return Code.size();
  return Newline > Offset && Code[Newline - 1] == '\r' ? Newline - 1 : Newline;
}

/// The start of the line after the one holding Offset (past its `\n`), or
/// one past the end of the text where it is the last line.
inline size_t nextLineStart(llvm::StringRef Code, size_t Offset) {
  size_t Newline = Code.find('\n', Offset);
  return Newline == llvm::StringRef::npos ? Code.size() + 1 : Newline + 1;
}

/// The line holding Offset, without its line ending.
inline llvm::StringRef lineAt(llvm::StringRef Code, size_t Offset) {
  size_t Begin = lineStart(Code, Offset);
  return Code.slice(Begin, lineEnd(Code, Begin));
}

/// The blanks (spaces and tabs) that start the line holding Offset.
inline llvm::StringRef indentationAt(llvm::StringRef Code, size_t Offset) {
  return Code.substr(lineStart(Code, Offset)).take_while([](char C) {
    return C == ' ' || C == '\t';
  });
}

} // namespace ddpify

#endif // DDPIFY_SOURCELINES_H
