//===- CMakeLexer.cpp - the CMake language, read as written ---------------===//

#include "ddpify/CMakeLexer.h"
#include "llvm/ADT/StringExtras.h"
#include <optional>

namespace ddpify {
namespace {

class CMakeLexer {
public:
  explicit CMakeLexer(llvm::StringRef Text) : Text(Text) {}

  llvm::Expected<std::vector<CMakeCommand>> run() {
    std::vector<CMakeCommand> Commands;
    if (Text.starts_with("\xEF\xBB\xBF"))
      Pos = 3;
    while (Pos < Text.size()) {
      char C = Text[Pos];
      if (C == ' ' || C == '\t' || C == '\r' || C == '\n') {
        ++Pos;
        continue;
      }
      if (C == '#') {
        if (llvm::Error Err = skipComment())
          return std::move(Err);
        continue;
      }
      if (!isIdentifierStart(C))
        return error("unexpected '" + std::string(1, C) + "'");
      CMakeCommand Command;
      if (llvm::Error Err = command(Command))
        return std::move(Err);
      Commands.push_back(std::move(Command));
    }
    return Commands;
  }

  /// From just after a command's `)`: past spaces and comments up to the end
  /// of the line (a bracket comment may run over several lines).
  unsigned lineEndAfter(unsigned From) {
    Pos = From;
    while (Pos < Text.size()) {
      char C = Text[Pos];
      if (C == ' ' || C == '\t') {
        ++Pos;
      } else if (C == '#') {
        if (llvm::Error Err = skipComment()) {
          llvm::consumeError(std::move(Err));
          return Text.size();
        }
      } else {
        break;
      }
    }
    return Pos;
  }

private:
  static bool isIdentifierStart(char C) { return llvm::isAlpha(C) || C == '_'; }

  unsigned lineAt(unsigned Offset) const {
    return 1 + Text.take_front(Offset).count('\n');
  }

  llvm::Error error(const std::string &Message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "line %u: %s", lineAt(Pos), Message.c_str());
  }

  /// `[` `=`* `[` at Pos: the number of `=`, else std::nullopt.
  std::optional<unsigned> bracketOpen(unsigned At) const {
    if (At >= Text.size() || Text[At] != '[')
      return std::nullopt;
    unsigned Level = 0;
    unsigned I = At + 1;
    while (I < Text.size() && Text[I] == '=')
      ++Level, ++I;
    if (I < Text.size() && Text[I] == '[')
      return Level;
    return std::nullopt;
  }

  /// Pos at `[==[`: moves past the matching `]==]`; returns the content.
  llvm::Expected<llvm::StringRef> bracket(unsigned Level) {
    unsigned Start = Pos;
    unsigned ContentBegin = Pos + Level + 2;
    std::string Closing = "]" + std::string(Level, '=') + "]";
    size_t End = Text.find(Closing, ContentBegin);
    if (End == llvm::StringRef::npos) {
      Pos = Start;
      return error("unterminated bracket argument or comment");
    }
    Pos = End + Closing.size();
    return Text.slice(ContentBegin, End);
  }

  llvm::Error skipComment() {
    // Pos at '#'.
    if (std::optional<unsigned> Level = bracketOpen(Pos + 1)) {
      ++Pos;
      llvm::Expected<llvm::StringRef> Content = bracket(*Level);
      return Content ? llvm::Error::success() : Content.takeError();
    }
    while (Pos < Text.size() && Text[Pos] != '\n')
      ++Pos;
    return llvm::Error::success();
  }

  /// Pos at '"': moves past the closing quote.
  llvm::Error quoted() {
    unsigned Start = Pos++;
    while (Pos < Text.size()) {
      char C = Text[Pos];
      if (C == '\\') {
        Pos += 2;
        continue;
      }
      ++Pos;
      if (C == '"')
        return llvm::Error::success();
    }
    Pos = Start;
    return error("unterminated quoted argument");
  }

  llvm::Error command(CMakeCommand &Command) {
    Command.Offset = Pos;
    Command.Line = lineAt(Pos);
    while (Pos < Text.size() && (llvm::isAlnum(Text[Pos]) || Text[Pos] == '_'))
      ++Pos;
    Command.Name = Text.slice(Command.Offset, Pos).lower();
    while (Pos < Text.size() && (Text[Pos] == ' ' || Text[Pos] == '\t'))
      ++Pos;
    if (Pos >= Text.size() || Text[Pos] != '(')
      return error("expected '(' after '" + Command.Name + "'");
    ++Pos;
    unsigned Depth = 1;
    while (true) {
      if (Pos >= Text.size()) {
        Pos = Command.Offset;
        return error("command '" + Command.Name + "' is never closed");
      }
      char C = Text[Pos];
      if (C == ' ' || C == '\t' || C == '\r' || C == '\n') {
        ++Pos;
      } else if (C == '#') {
        if (llvm::Error Err = skipComment())
          return Err;
      } else if (C == '(') {
        ++Depth, ++Pos;
      } else if (C == ')') {
        if (--Depth == 0) {
          Command.Close = Pos++;
          Command.LineEnd = lineEndAfter(Pos);
          Pos = Command.Close + 1;
          return llvm::Error::success();
        }
        ++Pos;
      } else if (C == '"') {
        CMakeArgument Arg;
        Arg.Kind = CMakeArgument::Quoted;
        Arg.Offset = Pos;
        if (llvm::Error Err = quoted())
          return Err;
        Arg.Length = Pos - Arg.Offset;
        Arg.Value = Text.slice(Arg.Offset + 1, Pos - 1).str();
        Command.Args.push_back(std::move(Arg));
      } else if (std::optional<unsigned> Level = bracketOpen(Pos)) {
        CMakeArgument Arg;
        Arg.Kind = CMakeArgument::Bracket;
        Arg.Offset = Pos;
        llvm::Expected<llvm::StringRef> Content = bracket(*Level);
        if (!Content)
          return Content.takeError();
        Arg.Length = Pos - Arg.Offset;
        Arg.Value = Content->str();
        Command.Args.push_back(std::move(Arg));
      } else {
        // Unquoted, up to whitespace, a parenthesis or a comment; escapes
        // and (legacy) quoted pieces inside stay part of it.
        CMakeArgument Arg;
        Arg.Offset = Pos;
        while (Pos < Text.size()) {
          char D = Text[Pos];
          if (D == ' ' || D == '\t' || D == '\r' || D == '\n' || D == '(' ||
              D == ')' || D == '#')
            break;
          if (D == '\\') {
            Pos += 2;
          } else if (D == '"') {
            if (llvm::Error Err = quoted())
              return Err;
          } else {
            ++Pos;
          }
        }
        Pos = std::min<unsigned>(Pos, Text.size());
        Arg.Length = Pos - Arg.Offset;
        Arg.Value = Text.slice(Arg.Offset, Pos).str();
        Command.Args.push_back(std::move(Arg));
      }
    }
  }

  llvm::StringRef Text;
  unsigned Pos = 0;
};

} // namespace

llvm::Expected<std::vector<CMakeCommand>> parseCMake(llvm::StringRef Text) {
  return CMakeLexer(Text).run();
}

unsigned cmakeLineEnd(llvm::StringRef Text, unsigned From) {
  return CMakeLexer(Text).lineEndAfter(From);
}

} // namespace ddpify
