//===- CMakeRewriter.cpp - R10: CMakeLists.txt edits ----------------------===//

#include "ddpify/CMakeRewriter.h"
#include "ddpify/EditSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <map>
#include <optional>
#include <set>

namespace ddpify {
namespace {

//===----------------------------------------------------------------------===//
// The lexer (cmake-language(7))
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// What a CMakeLists.txt declares
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral RuntimeTarget = "ddpify::runtime";

struct LinkCall {
  size_t Command;
  bool Keyword; ///< PRIVATE/PUBLIC/INTERFACE signature.
};

struct Target {
  std::string Name;              ///< Variables expanded.
  std::string WrittenName;       ///< As written in add_executable/add_library.
  size_t Definition = 0;         ///< Index of its add_executable/add_library.
  bool Interface = false;        ///< An INTERFACE library.
  std::set<std::string> Sources; ///< Absolute, normalised.
  std::vector<LinkCall> Links;   ///< Its target_link_libraries in this file.
  bool LinksRuntime = false;
};

struct BuildFile {
  std::string Path; ///< Of the CMakeLists.txt.
  std::string Dir;
  std::string Text;
  std::vector<CMakeCommand> Commands;
  std::string ParseError;
  std::vector<Target> Targets;
  std::optional<size_t> FindTorch, Project;
  bool FindsDdpify = false;
  /// Variables known at the end of the file (what add_subdirectory children
  /// inherit, roughly).
  std::map<std::string, std::string> Vars;
};

bool isHeader(llvm::StringRef Path) {
  llvm::StringRef Ext = llvm::sys::path::extension(Path);
  return Ext == ".h" || Ext == ".hh" || Ext == ".hpp" || Ext == ".hxx" ||
         Ext == ".inl" || Ext == ".inc" || Ext == ".cuh" || Ext == ".ipp" ||
         Ext == ".tcc" || Ext.empty();
}

std::string normalise(llvm::StringRef Dir, llvm::StringRef Path) {
  llvm::SmallString<256> Result;
  if (llvm::sys::path::is_absolute(Path)) {
    Result = Path;
  } else {
    Result = Dir;
    llvm::sys::path::append(Result, Path);
  }
  llvm::sys::path::remove_dots(Result, /*remove_dot_dot=*/true);
  return Result.str().str();
}

/// Expands `${VAR}` references from Vars (one level, inner references
/// first); std::nullopt when one is unknown (a source list we cannot
/// resolve is not guessed at).
std::optional<std::string>
expand(llvm::StringRef Value, const std::map<std::string, std::string> &Vars) {
  std::string Out;
  size_t I = 0;
  while (I < Value.size()) {
    if (Value[I] == '$' && I + 1 < Value.size() && Value[I + 1] == '{') {
      // The innermost reference ends at the first '}'.
      size_t Close = Value.find('}', I);
      if (Close == llvm::StringRef::npos)
        return std::nullopt;
      size_t Open = Value.take_front(Close).rfind("${");
      if (Open != I) {
        // Nested: expand the inner one first, then the rest again.
        std::optional<std::string> Inner =
            expand(Value.slice(Open, Close + 1), Vars);
        if (!Inner)
          return std::nullopt;
        std::string Rewritten = Value.take_front(Open).str() + *Inner +
                                Value.substr(Close + 1).str();
        std::optional<std::string> Rest =
            expand(llvm::StringRef(Rewritten).substr(I), Vars);
        if (!Rest)
          return std::nullopt;
        return Out + *Rest;
      }
      auto Known = Vars.find(Value.slice(I + 2, Close).str());
      if (Known == Vars.end())
        return std::nullopt;
      Out += Known->second;
      I = Close + 1;
      continue;
    }
    if (Value[I] == '\\' && I + 1 < Value.size()) {
      Out += Value[I + 1];
      I += 2;
      continue;
    }
    Out += Value[I++];
  }
  return Out;
}

/// The list items an argument stands for: an unquoted argument splits on
/// `;`, a quoted or bracket one is one item.
std::optional<std::vector<std::string>>
items(const CMakeArgument &Arg,
      const std::map<std::string, std::string> &Vars) {
  std::optional<std::string> Value =
      Arg.Kind == CMakeArgument::Bracket ? Arg.Value : expand(Arg.Value, Vars);
  if (!Value)
    return std::nullopt;
  std::vector<std::string> Result;
  if (Arg.Kind != CMakeArgument::Unquoted) {
    Result.push_back(*Value);
    return Result;
  }
  llvm::SmallVector<llvm::StringRef, 8> Parts;
  llvm::StringRef(*Value).split(Parts, ';', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef Part : Parts)
    Result.push_back(Part.str());
  return Result;
}

bool isKeyword(llvm::StringRef Arg) {
  return Arg == "PRIVATE" || Arg == "PUBLIC" || Arg == "INTERFACE";
}

void readBuildFile(BuildFile &File,
                   const std::map<std::string, std::string> &Inherited) {
  llvm::Expected<std::vector<CMakeCommand>> Commands = parseCMake(File.Text);
  if (!Commands) {
    File.ParseError = llvm::toString(Commands.takeError());
    return;
  }
  File.Commands = std::move(*Commands);
  std::map<std::string, std::string> &Vars = File.Vars;
  Vars = Inherited;
  Vars["CMAKE_CURRENT_SOURCE_DIR"] = File.Dir;
  Vars["CMAKE_CURRENT_LIST_DIR"] = File.Dir;
  auto Expanded = [&](const CMakeArgument &Arg) -> std::string {
    std::optional<std::string> Value = Arg.Kind == CMakeArgument::Bracket
                                           ? Arg.Value
                                           : expand(Arg.Value, Vars);
    return Value ? *Value : std::string();
  };
  auto FindTarget = [&](const CMakeArgument &Arg) -> Target * {
    std::string Name = Expanded(Arg);
    for (Target &T : File.Targets)
      if (!Name.empty() && T.Name == Name)
        return &T;
    return nullptr;
  };
  // Name = Values followed by the items of Args (for set(), up to CACHE or
  // PARENT_SCOPE); a value that cannot be expanded makes Name unknown.
  auto Assign = [&](const std::string &Name, std::vector<std::string> Values,
                    llvm::ArrayRef<CMakeArgument> Args, bool StopAtScope) {
    for (const CMakeArgument &Arg : Args) {
      if (StopAtScope && Arg.Kind == CMakeArgument::Unquoted &&
          (Arg.Value == "CACHE" || Arg.Value == "PARENT_SCOPE"))
        break;
      std::optional<std::vector<std::string>> Items = items(Arg, Vars);
      if (!Items) {
        Vars.erase(Name);
        return;
      }
      Values.insert(Values.end(), Items->begin(), Items->end());
    }
    Vars[Name] = llvm::join(Values, ";");
  };
  auto AddSources = [&](Target &T, llvm::ArrayRef<CMakeArgument> Args) {
    for (const CMakeArgument &Arg : Args) {
      if (Arg.Kind == CMakeArgument::Unquoted && isKeyword(Arg.Value))
        continue;
      if (Arg.Value == "FILE_SET")
        return; // Header sets: not compiled sources.
      std::optional<std::vector<std::string>> Items = items(Arg, Vars);
      if (!Items)
        continue;
      for (const std::string &Item : *Items)
        if (Item.find("$<") == std::string::npos)
          T.Sources.insert(normalise(File.Dir, Item));
    }
  };

  for (size_t I = 0; I < File.Commands.size(); ++I) {
    const CMakeCommand &C = File.Commands[I];
    llvm::ArrayRef<CMakeArgument> Args = C.Args;
    if (C.Name == "project" && !Args.empty()) {
      if (!File.Project)
        File.Project = I;
      std::string Name = Expanded(Args[0]);
      Vars["PROJECT_NAME"] = Name;
      Vars["CMAKE_PROJECT_NAME"] = Name;
      Vars["PROJECT_SOURCE_DIR"] = File.Dir;
      Vars[Name + "_SOURCE_DIR"] = File.Dir;
    } else if (C.Name == "set" && !Args.empty()) {
      Assign(Expanded(Args[0]), {}, Args.drop_front(), /*StopAtScope=*/true);
    } else if (C.Name == "list" && Args.size() >= 2 &&
               Args[0].Value == "APPEND") {
      std::string Name = Expanded(Args[1]);
      auto Existing = Vars.find(Name);
      std::vector<std::string> Values;
      if (Existing != Vars.end() && !Existing->second.empty())
        Values.push_back(Existing->second);
      Assign(Name, std::move(Values), Args.drop_front(2),
             /*StopAtScope=*/false);
    } else if (C.Name == "find_package" && !Args.empty()) {
      std::string Package = Expanded(Args[0]);
      if (Package == "Torch" && !File.FindTorch)
        File.FindTorch = I;
      if (llvm::StringRef(Package).equals_insensitive("ddpify"))
        File.FindsDdpify = true;
    } else if ((C.Name == "add_executable" || C.Name == "add_library") &&
               !Args.empty()) {
      llvm::ArrayRef<CMakeArgument> Rest = Args.drop_front();
      if (!Rest.empty() &&
          (Rest[0].Value == "IMPORTED" || Rest[0].Value == "ALIAS"))
        continue;
      Target T;
      T.Name = Expanded(Args[0]);
      T.WrittenName = File.Text.substr(Args[0].Offset, Args[0].Length);
      T.Definition = I;
      static const char *const Options[] = {
          "WIN32",  "MACOSX_BUNDLE", "EXCLUDE_FROM_ALL", "STATIC", "SHARED",
          "MODULE", "OBJECT",        "INTERFACE",        "UNKNOWN"};
      while (!Rest.empty() && Rest[0].Kind == CMakeArgument::Unquoted &&
             llvm::is_contained(Options, Rest[0].Value)) {
        if (Rest[0].Value == "INTERFACE")
          T.Interface = true;
        if (Rest[0].Value == "IMPORTED")
          break;
        Rest = Rest.drop_front();
      }
      if (!Rest.empty() && Rest[0].Value == "IMPORTED")
        continue;
      if (T.Name.empty())
        continue;
      AddSources(T, Rest);
      File.Targets.push_back(std::move(T));
    } else if (C.Name == "target_sources" && !Args.empty()) {
      if (Target *T = FindTarget(Args[0]))
        AddSources(*T, Args.drop_front());
    } else if (C.Name == "target_link_libraries" && Args.size() >= 2) {
      Target *T = FindTarget(Args[0]);
      if (!T)
        continue;
      bool Keyword = false;
      for (const CMakeArgument &Arg : Args.drop_front()) {
        if (Arg.Kind == CMakeArgument::Unquoted && isKeyword(Arg.Value))
          Keyword = true;
        std::optional<std::vector<std::string>> Items = items(Arg, Vars);
        if (Items && llvm::is_contained(*Items, RuntimeTarget.str()))
          T->LinksRuntime = true;
        if (Arg.Value == RuntimeTarget)
          T->LinksRuntime = true;
      }
      T->Links.push_back({I, Keyword});
    }
  }
}

//===----------------------------------------------------------------------===//
// Which translation units changed
//===----------------------------------------------------------------------===//

/// The quoted and angled #include names of a file.
std::vector<std::string> includeNames(llvm::StringRef Code) {
  std::vector<std::string> Names;
  llvm::SmallVector<llvm::StringRef, 0> Lines;
  Code.split(Lines, '\n');
  for (llvm::StringRef Line : Lines) {
    Line = Line.ltrim(" \t");
    if (!Line.consume_front("#"))
      continue;
    Line = Line.ltrim(" \t");
    if (!Line.consume_front("include"))
      continue;
    Line = Line.ltrim(" \t");
    if (Line.empty() || (Line[0] != '"' && Line[0] != '<'))
      continue;
    char Close = Line[0] == '"' ? '"' : '>';
    size_t End = Line.find(Close, 1);
    if (End != llvm::StringRef::npos)
      Names.push_back(Line.slice(1, End).str());
  }
  return Names;
}

/// Whether File includes (directly or through headers found next to their
/// includers) one of ChangedHeaders. An include is taken to name a changed
/// header when it resolves next to its includer or when the header's path
/// ends with it (headers found through -I).
bool includesChanged(const std::string &File,
                     const std::set<std::string> &ChangedHeaders,
                     std::set<std::string> &Visited) {
  if (!Visited.insert(File).second)
    return false;
  llvm::Expected<std::string> Code = readFile(File);
  if (!Code) {
    llvm::consumeError(Code.takeError());
    return false;
  }
  std::string Dir = llvm::sys::path::parent_path(File).str();
  for (const std::string &Name : includeNames(*Code)) {
    std::string Beside = normalise(Dir, Name);
    if (ChangedHeaders.count(Beside))
      return true;
    for (const std::string &Header : ChangedHeaders)
      if (llvm::StringRef(Header).ends_with("/" + Name))
        return true;
    if (llvm::sys::fs::is_regular_file(Beside) &&
        includesChanged(Beside, ChangedHeaders, Visited))
      return true;
  }
  return false;
}

bool isUnder(llvm::StringRef Path, llvm::StringRef Dir) {
  return Path.starts_with(Dir) &&
         (Path.size() == Dir.size() || Dir.ends_with("/") ||
          llvm::sys::path::is_separator(Path[Dir.size()]));
}

std::string relative(llvm::StringRef Path, llvm::StringRef Root) {
  llvm::StringRef Rest = Path;
  if (Rest.consume_front(Root))
    Rest = Rest.ltrim('/');
  return Rest.str();
}

/// The indentation of the line holding Offset.
std::string indentAt(llvm::StringRef Text, unsigned Offset) {
  size_t LineStart = Text.rfind('\n', Offset == 0 ? 0 : Offset - 1);
  LineStart =
      (LineStart == llvm::StringRef::npos || Offset == 0) ? 0 : LineStart + 1;
  llvm::StringRef Line = Text.slice(LineStart, Offset);
  return Line.take_while([](char C) { return C == ' ' || C == '\t'; }).str();
}

class Migrator {
public:
  Migrator(llvm::StringRef Root, CMakeMigration &Out) : Root(Root), Out(Out) {}

  void run(llvm::ArrayRef<std::string> ChangedFiles,
           llvm::ArrayRef<std::string> TranslationUnits) {
    std::set<std::string> Changed, ChangedHeaders;
    for (const std::string &File : ChangedFiles) {
      if (llvm::sys::path::filename(File) == "CMakeLists.txt")
        continue;
      Changed.insert(File);
      if (isHeader(File))
        ChangedHeaders.insert(File);
    }
    if (!ChangedHeaders.empty())
      for (const std::string &Unit : TranslationUnits) {
        std::set<std::string> Visited;
        if (!Changed.count(Unit) &&
            includesChanged(Unit, ChangedHeaders, Visited))
          Changed.insert(Unit);
      }

    bool AnyBuildFile = false;
    for (const std::string &File : Changed) {
      std::vector<BuildFile *> Chain = chainOf(File);
      AnyBuildFile |= !Chain.empty();
      bool Listed = false;
      for (BuildFile *Build : Chain)
        for (size_t I = 0; I < Build->Targets.size(); ++I)
          if (Build->Targets[I].Sources.count(File)) {
            Listed = true;
            Needed[{Build->Path, I}] = Build;
          }
      if (Listed || isHeader(File) || Chain.empty())
        continue;
      bool Unreadable = false;
      for (BuildFile *Build : Chain)
        Unreadable |= !Build->ParseError.empty();
      if (Unreadable)
        continue; // cmake-parse-error says why.
      std::vector<std::string> Names;
      for (BuildFile *Build : Chain)
        Names.push_back(relative(Build->Path, Root));
      item(File, 1, "cmake-target-not-found",
           "no add_executable/add_library/target_sources in " +
               llvm::join(Names, ", ") +
               " lists this changed file; link its target to "
               "ddpify::runtime (and find_package(ddpify REQUIRED)) by hand");
    }
    Out.NoBuildFile = !Changed.empty() && !AnyBuildFile;

    for (const auto &[Key, Build] : Needed)
      linkTarget(*Build, Build->Targets[Key.second]);
    for (auto &[Key, Text] : Insertions) {
      const auto &[Path, Offset] = Key;
      Out.Edits.emplace_back(Path, Offset, 0, Text);
    }
  }

private:
  BuildFile *load(const std::string &Dir) {
    auto Known = Files.find(Dir);
    if (Known != Files.end())
      return Known->second.get();
    std::unique_ptr<BuildFile> &Slot = Files[Dir];
    llvm::SmallString<256> Path(Dir);
    llvm::sys::path::append(Path, "CMakeLists.txt");
    if (!llvm::sys::fs::is_regular_file(Path))
      return nullptr;
    llvm::Expected<std::string> Text = readFile(Path);
    if (!Text) {
      llvm::consumeError(Text.takeError());
      return nullptr;
    }
    // A subdirectory sees its parent's variables (${PROJECT_NAME}, ...).
    std::map<std::string, std::string> Inherited;
    for (llvm::StringRef Up = llvm::sys::path::parent_path(Dir);
         !Up.empty() && isUnder(Up, Root);
         Up = llvm::sys::path::parent_path(Up))
      if (BuildFile *Parent = load(Up.str())) {
        Inherited = Parent->Vars;
        break;
      }
    Slot = std::make_unique<BuildFile>();
    Slot->Path = Path.str().str();
    Slot->Dir = Dir;
    Slot->Text = std::move(*Text);
    readBuildFile(*Slot, Inherited);
    if (!Slot->ParseError.empty())
      item(Slot->Path, 1, "cmake-parse-error",
           "ddpify cannot read this CMakeLists.txt (" + Slot->ParseError +
               ") and left it alone; link the changed targets to "
               "ddpify::runtime by hand");
    return Slot.get();
  }

  /// The CMakeLists.txt files from File's folder up to the root, nearest
  /// first.
  std::vector<BuildFile *> chainOf(llvm::StringRef File) {
    std::vector<BuildFile *> Chain;
    for (llvm::StringRef Dir = llvm::sys::path::parent_path(File);
         !Dir.empty() && isUnder(Dir, Root);
         Dir = llvm::sys::path::parent_path(Dir))
      if (BuildFile *Build = load(Dir.str()))
        Chain.push_back(Build);
    return Chain;
  }

  void item(const std::string &File, unsigned Line, llvm::StringRef Id,
            const std::string &Reason) {
    Finding F;
    F.RuleId = "R10";
    F.Form = FindingForm::ReportOnly;
    F.FilePath = File;
    F.Line = Line;
    F.Column = 1;
    F.ReportId = Id.str();
    F.NotRewrittenReason = Reason;
    F.Message = Reason;
    Out.Findings.push_back(std::move(F));
  }

  void insert(const BuildFile &Build, unsigned Offset, const std::string &Text,
              const std::string &What) {
    Insertions[{Build.Path, Offset}] += Text;
    Finding F;
    F.RuleId = "R10";
    F.Form = FindingForm::BuildFileEdit;
    F.FilePath = Build.Path;
    F.Offset = Offset;
    F.Line = 1 + llvm::StringRef(Build.Text).take_front(Offset).count('\n');
    F.Column = 1;
    F.Message = What;
    Out.Findings.push_back(std::move(F));
  }

  /// The statement `find_package(ddpify REQUIRED)` for Build's targets, once.
  void findPackage(BuildFile &Build) {
    std::vector<BuildFile *> Chain = chainOf(Build.Path);
    for (BuildFile *File : Chain)
      if (File->FindsDdpify)
        return;
    BuildFile *Anchor = nullptr;
    std::optional<size_t> Command;
    for (BuildFile *File : Chain)
      if (File->FindTorch) {
        Anchor = File, Command = File->FindTorch;
        break;
      }
    if (!Anchor)
      for (BuildFile *File : Chain)
        if (File->Project) {
          Anchor = File, Command = File->Project;
          break;
        }
    if (!Anchor) {
      if (NoFindPackageReported.insert(Build.Path).second)
        item(Build.Path, 1, "cmake-no-find-package",
             "neither find_package(Torch) nor project() in this "
             "CMakeLists.txt or its parents: add find_package(ddpify "
             "REQUIRED) before the targets that link ddpify::runtime");
      return;
    }
    const CMakeCommand &C = Anchor->Commands[*Command];
    insert(*Anchor, C.LineEnd,
           "\n" + indentAt(Anchor->Text, C.Offset) +
               "find_package(ddpify REQUIRED)",
           "find_package(ddpify REQUIRED)");
    Anchor->FindsDdpify = true;
  }

  void linkTarget(BuildFile &Build, Target &T) {
    if (T.LinksRuntime)
      return;
    findPackage(Build);
    T.LinksRuntime = true;
    std::string Keyword = T.Interface ? "INTERFACE" : "PRIVATE";
    bool HasKeyword = false, HasPlain = false;
    for (const LinkCall &Link : T.Links)
      (Link.Keyword ? HasKeyword : HasPlain) = true;

    // Into an existing list: after the last item of the call's <Keyword>
    // section (keyword signature) or of the last call (plain signature).
    std::optional<std::pair<size_t, size_t>> Into; // command, argument
    if (HasKeyword) {
      for (const LinkCall &Link : T.Links) {
        const CMakeCommand &C = Build.Commands[Link.Command];
        bool InSection = false;
        std::optional<size_t> Last;
        for (size_t A = 1; A < C.Args.size(); ++A) {
          const CMakeArgument &Arg = C.Args[A];
          if (Arg.Kind == CMakeArgument::Unquoted && isKeyword(Arg.Value)) {
            if (InSection)
              break;
            InSection = Arg.Value == Keyword;
            if (InSection)
              Last = A;
            continue;
          }
          if (InSection)
            Last = A;
        }
        if (Last) {
          Into = {Link.Command, *Last};
          break;
        }
      }
    } else if (HasPlain) {
      size_t Command = T.Links.back().Command;
      Into = {Command, Build.Commands[Command].Args.size() - 1};
    }

    std::string What = "ddpify::runtime linked to '" + T.Name + "'";
    if (Into) {
      const CMakeCommand &C = Build.Commands[Into->first];
      const CMakeArgument &Arg = C.Args[Into->second];
      unsigned After = Arg.Offset + Arg.Length;
      // One item per line stays so: a new line, indented as that item.
      std::string Indent = indentAt(Build.Text, Arg.Offset);
      bool OwnLine = Arg.Offset ==
                     (Build.Text.rfind('\n', Arg.Offset) + 1) + Indent.size();
      unsigned CloseLineStart = Build.Text.rfind('\n', C.Close) + 1;
      // Past a comment that ends the item's line.
      unsigned LineEnd = CMakeLexer(Build.Text).lineEndAfter(After);
      bool EndsLine = LineEnd == Build.Text.size() ||
                      Build.Text[LineEnd] == '\n' ||
                      Build.Text[LineEnd] == '\r';
      if (OwnLine && EndsLine && After <= CloseLineStart) {
        insert(Build, LineEnd, "\n" + Indent + RuntimeTarget.str(), What);
      } else {
        insert(Build, After, " " + RuntimeTarget.str(), What);
      }
      return;
    }
    // A new call, after the target's last target_link_libraries or its
    // definition.
    size_t Anchor = T.Links.empty() ? T.Definition : T.Links.back().Command;
    const CMakeCommand &C = Build.Commands[Anchor];
    std::string Call = "target_link_libraries(" + T.WrittenName + " " +
                       (HasPlain ? "" : Keyword + " ") + RuntimeTarget.str() +
                       ")";
    insert(Build, C.LineEnd, "\n" + indentAt(Build.Text, C.Offset) + Call,
           What);
  }

  std::string Root;
  CMakeMigration &Out;
  std::map<std::string, std::unique_ptr<BuildFile>> Files;
  /// (CMakeLists.txt, target index) -> its file: in a stable order.
  std::map<std::pair<std::string, size_t>, BuildFile *> Needed;
  std::map<std::pair<std::string, unsigned>, std::string> Insertions;
  std::set<std::string> NoFindPackageReported;
};

} // namespace

llvm::Expected<std::vector<CMakeCommand>> parseCMake(llvm::StringRef Text) {
  return CMakeLexer(Text).run();
}

CMakeMigration migrateCMake(llvm::ArrayRef<std::string> ChangedFiles,
                            llvm::ArrayRef<std::string> TranslationUnits,
                            llvm::StringRef Root) {
  CMakeMigration Out;
  Migrator(Root, Out).run(ChangedFiles, TranslationUnits);
  return Out;
}

} // namespace ddpify
