//===- cmake_lexer.cpp - fuzz target: the CMake lexer ---------------------===//
//
// The input is a CMake file. parseCMake either fails with an error naming a
// line, or gives commands whose offsets R10 may use to edit the text: each in
// order, inside the text, its name and arguments where the text has them.
//
//===----------------------------------------------------------------------===//

#include "FuzzCheck.h"
#include "ddpify/CMakeLexer.h"
#include <cstddef>
#include <cstdint>

using namespace ddpify;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  llvm::StringRef Text(reinterpret_cast<const char *>(Data), Size);
  llvm::Expected<std::vector<CMakeCommand>> Commands = parseCMake(Text);
  if (!Commands) {
    std::string Message = llvm::toString(Commands.takeError());
    FUZZ_CHECK(llvm::StringRef(Message).starts_with("line "));
    return 0;
  }
  unsigned NextFree = 0;
  for (const CMakeCommand &C : *Commands) {
    FUZZ_CHECK(C.Offset >= NextFree);
    FUZZ_CHECK(C.Offset + C.Name.size() <= C.Close);
    FUZZ_CHECK(C.Close < Size && Text[C.Close] == ')');
    FUZZ_CHECK(Text.substr(C.Offset, C.Name.size()).lower() == C.Name);
    FUZZ_CHECK(C.Line == 1 + Text.take_front(C.Offset).count('\n'));
    FUZZ_CHECK(C.LineEnd > C.Close && C.LineEnd <= Size);
    FUZZ_CHECK(cmakeLineEnd(Text, C.Close + 1) == C.LineEnd);
    unsigned ArgFree = C.Offset + C.Name.size();
    for (const CMakeArgument &Arg : C.Args) {
      FUZZ_CHECK(Arg.Offset >= ArgFree && Arg.Length > 0);
      FUZZ_CHECK(Arg.Offset + Arg.Length <= C.Close);
      llvm::StringRef Written = Text.substr(Arg.Offset, Arg.Length);
      switch (Arg.Kind) {
      case CMakeArgument::Unquoted:
        FUZZ_CHECK(Written == Arg.Value);
        break;
      case CMakeArgument::Quoted:
        FUZZ_CHECK(Written.size() >= 2 && Written.front() == '"' &&
                   Written.back() == '"');
        FUZZ_CHECK(Written.drop_front().drop_back() == Arg.Value);
        break;
      case CMakeArgument::Bracket:
        FUZZ_CHECK(Written.starts_with("[") && Written.ends_with("]"));
        FUZZ_CHECK(Written.contains(Arg.Value));
        break;
      }
      // Where R10 inserts after an argument (a new item of a list).
      unsigned End = cmakeLineEnd(Text, Arg.Offset + Arg.Length);
      FUZZ_CHECK(End >= Arg.Offset + Arg.Length && End <= Size);
      ArgFree = Arg.Offset + Arg.Length;
    }
    NextFree = C.Close + 1;
  }
  return 0;
}
