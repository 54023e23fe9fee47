//===- CheckGlobs.cpp - clang-tidy's --checks glob lists ------------------===//

#include "CheckGlobs.h"
#include "llvm/ADT/SmallVector.h"

namespace ddpify {
namespace {

/// clang-tidy's glob: `*` matches any run of characters, nothing else is
/// special.
bool matchesGlob(llvm::StringRef Glob, llvm::StringRef Name) {
  size_t Star = Glob.find('*');
  if (Star == llvm::StringRef::npos)
    return Glob == Name;
  if (!Name.consume_front(Glob.take_front(Star)))
    return false;
  Glob = Glob.drop_front(Star + 1);
  // Try every split point for the rest.
  for (size_t I = 0; I <= Name.size(); ++I)
    if (matchesGlob(Glob, Name.drop_front(I)))
      return true;
  return false;
}

} // namespace

bool matchesGlobList(llvm::StringRef Globs, llvm::StringRef CheckName) {
  bool Enabled = false;
  llvm::SmallVector<llvm::StringRef, 4> Parts;
  Globs.split(Parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef Part : Parts) {
    Part = Part.trim();
    bool Negative = Part.consume_front("-");
    Part = Part.trim();
    if (Part.empty())
      continue;
    if (matchesGlob(Part, CheckName))
      Enabled = !Negative;
  }
  return Enabled;
}

} // namespace ddpify
