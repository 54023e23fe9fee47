//===- CMakeRewriter.cpp - R10: CMakeLists.txt edits ----------------------===//

#include "ddpify/CMakeRewriter.h"
#include "ddpify/CMakeFileApi.h"
#include "ddpify/EditSet.h"
#include "ddpify/MatcherUtil.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <map>
#include <optional>
#include <set>

namespace ddpify {
namespace {

//===----------------------------------------------------------------------===//
// The CMake files R10 edits
//===----------------------------------------------------------------------===//

constexpr llvm::StringLiteral RuntimeTarget = "ddpify::runtime";

/// A CMake file under the root, as the lexer reads it: where its
/// find_package(Torch) and project() are, whether it finds ddpify already,
/// whether it overwrites CMAKE_PREFIX_PATH.
struct ListFile {
  std::string Path;
  std::string Text;
  std::vector<CMakeCommand> Commands;
  std::string ParseError;
  std::optional<size_t> FindTorch, Project;
  bool FindsDdpify = false;
  bool SetsPrefixPath = false;
  /// Per command, the if() blocks around it, outermost first: the index of
  /// the block's if() and which of its branches (0 for the if(), then one
  /// per elseif()/else()) holds the command.
  std::vector<std::vector<std::pair<size_t, unsigned>>> Branches;
};

/// Whether commands A and B of File lie in different branches of one if()
/// block: a configured build runs at most one of them.
bool exclusive(const ListFile &File, size_t A, size_t B) {
  for (const auto &[If, Branch] : File.Branches[A])
    for (const auto &[OtherIf, OtherBranch] : File.Branches[B])
      if (If == OtherIf && Branch != OtherBranch)
        return true;
  return false;
}

/// `set(CMAKE_PREFIX_PATH /opt/libtorch)`: a normal variable that hides the
/// cache's, so `-DCMAKE_PREFIX_PATH=<ddpify>` no longer reaches
/// find_package. Not a set() of the cache entry itself, nor one that keeps
/// the old value (`set(CMAKE_PREFIX_PATH "${CMAKE_PREFIX_PATH};/opt/x")`);
/// `$ENV{CMAKE_PREFIX_PATH}` is not the old value.
bool overwritesPrefixPath(const CMakeCommand &C) {
  if (C.Name != "set" || C.Args.size() < 2 ||
      C.Args[0].Value != "CMAKE_PREFIX_PATH")
    return false;
  for (const CMakeArgument &Arg : C.Args) {
    llvm::StringRef Value = Arg.Value;
    if (Value == "CACHE" || Value == "PARENT_SCOPE" ||
        Value.contains("${CMAKE_PREFIX_PATH}") ||
        Value.contains("$CACHE{CMAKE_PREFIX_PATH}"))
      return false;
  }
  return true;
}

void readListFile(ListFile &File) {
  llvm::Expected<std::vector<CMakeCommand>> Commands = parseCMake(File.Text);
  if (!Commands) {
    File.ParseError = llvm::toString(Commands.takeError());
    return;
  }
  File.Commands = std::move(*Commands);
  std::vector<std::pair<size_t, unsigned>> Open;
  for (size_t I = 0; I < File.Commands.size(); ++I) {
    const CMakeCommand &C = File.Commands[I];
    if ((C.Name == "elseif" || C.Name == "else") && !Open.empty())
      ++Open.back().second;
    else if (C.Name == "endif" && !Open.empty())
      Open.pop_back();
    File.Branches.push_back(Open);
    if (C.Name == "if")
      Open.push_back({I, 0});
    if (C.Name == "project" && !File.Project)
      File.Project = I;
    File.SetsPrefixPath |= overwritesPrefixPath(C);
    if (C.Name != "find_package" || C.Args.empty())
      continue;
    llvm::StringRef Package = C.Args[0].Value;
    if (Package == "Torch" && !File.FindTorch)
      File.FindTorch = I;
    if (Package.equals_insensitive("ddpify"))
      File.FindsDdpify = true;
  }
}

/// The command of File that a backtrace frame names (its line and name).
std::optional<size_t> commandAt(const ListFile &File, const CMakeFrame &Frame) {
  for (size_t I = 0; I < File.Commands.size(); ++I)
    if (File.Commands[I].Line == Frame.Line &&
        File.Commands[I].Name == Frame.Command)
      return I;
  return std::nullopt;
}

bool isHeader(llvm::StringRef Path) {
  llvm::StringRef Ext = llvm::sys::path::extension(Path);
  return Ext == ".h" || Ext == ".hh" || Ext == ".hpp" || Ext == ".hxx" ||
         Ext == ".inl" || Ext == ".inc" || Ext == ".cuh" || Ext == ".ipp" ||
         Ext == ".tcc" || Ext.empty();
}

bool isBuildFile(llvm::StringRef Path) {
  return llvm::sys::path::filename(Path) == "CMakeLists.txt" ||
         llvm::sys::path::extension(Path) == ".cmake";
}

std::string normalise(llvm::StringRef Dir, llvm::StringRef Path) {
  llvm::SmallString<256> Result(Path);
  llvm::sys::fs::make_absolute(Dir, Result);
  llvm::sys::path::remove_dots(Result, /*remove_dot_dot=*/true);
  return Result.str().str();
}

bool isKeyword(llvm::StringRef Arg) {
  return Arg == "PRIVATE" || Arg == "PUBLIC" || Arg == "INTERFACE";
}

//===----------------------------------------------------------------------===//
// Which sources changed
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

/// Where a target's link goes: after the outermost call that made it (the
/// add_executable/add_library itself, or the call of the user's macro or
/// function around it), in the file that holds that call.
const CMakeFrame *definitionSite(const CMakeTarget &Target) {
  if (Target.Definition.empty())
    return nullptr;
  size_t Site = 0;
  // A caller frame with a command is a macro or function call; one without
  // is the frame of a file (include(), add_subdirectory, the top).
  while (Site + 1 < Target.Definition.size() &&
         !Target.Definition[Site + 1].Command.empty())
    ++Site;
  return &Target.Definition[Site];
}

/// What to add by hand, for the report items of a build R10 cannot edit.
std::string byHand(llvm::ArrayRef<std::string> Sources) {
  return "add find_package(ddpify REQUIRED) after find_package(Torch) and "
         "target_link_libraries(<target> PRIVATE ddpify::runtime) for the "
         "target(s) compiling " +
         llvm::join(Sources, ", ");
}

/// A target_link_libraries call of a target, in the file that makes it.
struct LinkCall {
  size_t Command;
  bool Keyword;    ///< PRIVATE/PUBLIC/INTERFACE signature.
  bool HasRuntime; ///< Names ddpify::runtime.
  bool LinksTorch; ///< Names LibTorch (an argument that says torch).
};

class Migrator {
public:
  Migrator(llvm::StringRef Root, llvm::StringRef BuildDir, CMakeMigration &Out)
      : Root(Root), BuildDir(BuildDir), Out(Out) {}

  void run(llvm::ArrayRef<std::string> ChangedFiles) {
    std::set<std::string> Changed, ChangedHeaders;
    for (const std::string &File : ChangedFiles) {
      if (isBuildFile(File))
        continue;
      Changed.insert(File);
      if (isHeader(File))
        ChangedHeaders.insert(File);
    }
    if (Changed.empty())
      return;
    std::vector<std::string> ChangedSources;
    for (const std::string &File : Changed)
      if (!isHeader(File))
        ChangedSources.push_back(relative(File, Root));
    if (ChangedSources.empty())
      for (const std::string &File : Changed)
        ChangedSources.push_back(relative(File, Root));

    if (!isCMakeBuildFolder(BuildDir)) {
      notACMakeBuild(Changed, ChangedSources);
      return;
    }
    llvm::Expected<CMakeCodeModel> Model = readCMakeCodeModel(BuildDir);
    if (!Model) {
      std::string Why = llvm::toString(Model.takeError());
      item(topListFile(*Changed.begin()), 1, "cmake-file-api-failed",
           "ddpify could not read the targets from CMake in '" + BuildDir +
               "' (" + Why +
               ") and changed no build file: " + byHand(ChangedSources));
      return;
    }
    this->Model = &*Model;

    // Every target compiling a changed source, or a source that includes a
    // changed header; a library whose headers changed links PUBLIC, as its
    // users' code now includes ddp too. A changed source may include a
    // changed header as well (a library's model.cpp and model.h both get
    // ddp code): that makes the library's link PUBLIC all the same.
    std::set<std::string> Compiled;
    std::map<std::string, bool> IncludesChanged;
    for (const CMakeTarget &Target : Model->Targets) {
      if (Target.Type == "UTILITY")
        continue;
      bool Direct = false, ThroughHeader = false;
      std::string Why; // The first changed source, for an item.
      for (const std::string &Source : Target.Sources) {
        if (Changed.count(Source)) {
          Compiled.insert(Source);
          if (Why.empty())
            Why = Source;
          (isHeader(Source) ? ThroughHeader : Direct) = true;
        }
        if (ChangedHeaders.empty() || isHeader(Source) ||
            !isPathUnder(Source, Root))
          continue;
        auto Known = IncludesChanged.find(Source);
        if (Known == IncludesChanged.end()) {
          std::set<std::string> Visited;
          Known = IncludesChanged
                      .emplace(Source,
                               includesChanged(Source, ChangedHeaders, Visited))
                      .first;
        }
        ThroughHeader |= Known->second;
        if (Known->second && Why.empty())
          Why = Source;
      }
      if (!Direct && !ThroughHeader)
        continue;
      std::string Keyword = Target.Type == "INTERFACE_LIBRARY"    ? "INTERFACE"
                            : Target.isLibrary() && ThroughHeader ? "PUBLIC"
                                                                  : "PRIVATE";
      linkTarget(Target, Keyword, Why);
    }
    findPackage();
    for (const std::string &File : Changed)
      if (!isHeader(File) && !Compiled.count(File))
        item(File, 1, "cmake-target-not-found",
             "no target of the CMake build in '" + BuildDir +
                 "' compiles this changed file; link its target to "
                 "ddpify::runtime (and find_package(ddpify REQUIRED)) by hand");

    for (auto &[Key, Text] : Insertions) {
      const auto &[Path, Offset] = Key;
      Out.Edits.emplace_back(Path, Offset, 0, Text);
    }
  }

private:
  /// No CMake build folder: a CMake project not configured where ddpify
  /// looked is an item; a build of another kind gets the pkg-config flags.
  void notACMakeBuild(const std::set<std::string> &Changed,
                      llvm::ArrayRef<std::string> Sources) {
    std::string Lists = topListFile(*Changed.begin());
    if (llvm::sys::path::filename(Lists) == "CMakeLists.txt") {
      item(Lists, 1, "cmake-no-build-folder",
           std::string("R10 reads the targets from CMake's File API in the "
                       "build folder, and ") +
               (BuildDir.empty()
                    ? "none was given"
                    : "'" + BuildDir + "' is none (no CMakeCache.txt)") +
               ": configure the project (cmake -S . -B build "
               "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON) and run ddpify with "
               "-p build, or " +
               byHand(Sources));
      return;
    }
    std::string Flags =
        "compile " + llvm::join(Sources, ", ") +
        " with the flags of `pkg-config --cflags ddpify` and link the "
        "program with `pkg-config --libs ddpify` (in a Makefile: CXXFLAGS += "
        "$(shell pkg-config --cflags ddpify) and LDLIBS += $(shell "
        "pkg-config --libs ddpify)); ddpify.pc is in the ddpify build folder "
        "and, after cmake --install, in <prefix>/lib/pkgconfig: put that "
        "folder on PKG_CONFIG_PATH";
    if (BuildDir.empty()) {
      Out.Notes.push_back("no CMakeLists.txt between the changed files and "
                          "the root: R10 skipped; " +
                          Flags);
      return;
    }
    item(Lists, 1, "build-not-cmake",
         "the build folder '" + BuildDir +
             "' is not CMake's (no CMakeCache.txt), so no build file was "
             "changed: " +
             Flags);
  }

  /// The CMakeLists.txt nearest the root above File (a project's top), else
  /// a Makefile or other build file at the root, else File itself.
  std::string topListFile(llvm::StringRef File) {
    std::string Top;
    for (llvm::StringRef Dir = llvm::sys::path::parent_path(File);
         !Dir.empty() && isPathUnder(Dir, Root);
         Dir = llvm::sys::path::parent_path(Dir)) {
      llvm::SmallString<256> Path(Dir);
      llvm::sys::path::append(Path, "CMakeLists.txt");
      if (llvm::sys::fs::is_regular_file(Path))
        Top = Path.str().str();
    }
    if (!Top.empty())
      return Top;
    for (const char *Name :
         {"GNUmakefile", "makefile", "Makefile", "meson.build", "BUILD.bazel",
          "BUILD", "SConstruct"}) {
      llvm::SmallString<256> Path(Root);
      llvm::sys::path::append(Path, Name);
      if (llvm::sys::fs::is_regular_file(Path))
        return Path.str().str();
    }
    return File.str();
  }

  /// The lexer's reading of a CMake file, once: nullptr for one that does
  /// not exist; one that is not a regular file or cannot be read is an item
  /// naming it (cmake-unreadable), one that is not CMake another
  /// (cmake-parse-error).
  ListFile *read(const std::string &Path) {
    auto Known = Files.find(Path);
    if (Known != Files.end())
      return Known->second.get();
    std::unique_ptr<ListFile> &Slot = Files[Path];
    if (!llvm::sys::fs::exists(Path))
      return nullptr;
    std::string Why;
    std::string Text;
    if (!llvm::sys::fs::is_regular_file(Path)) {
      Why = "not a regular file";
    } else if (llvm::Expected<std::string> Read = readFile(Path)) {
      Text = std::move(*Read);
    } else {
      Why = llvm::errorToErrorCode(Read.takeError()).message();
    }
    if (!Why.empty()) {
      item(Path, 1, "cmake-unreadable",
           "ddpify cannot read the CMake file '" + Path + "' (" + Why +
               "), so it does not know whether it finds Torch or ddpify; "
               "where no find_package(ddpify REQUIRED) was added, add it "
               "after the project's find_package(Torch)");
      return nullptr;
    }
    Slot = std::make_unique<ListFile>();
    Slot->Path = Path;
    Slot->Text = std::move(Text);
    readListFile(*Slot);
    if (!Slot->ParseError.empty())
      item(Slot->Path, 1, "cmake-parse-error",
           "ddpify cannot read this CMake file (" + Slot->ParseError +
               ") and left it alone; link the changed targets to "
               "ddpify::runtime by hand");
    return Slot.get();
  }

  /// read(), for a file under the root (the only ones R10 edits).
  ListFile *load(const std::string &Path) {
    return isPathUnder(Path, Root) ? read(Path) : nullptr;
  }

  void item(const std::string &File, unsigned Line, llvm::StringRef Id,
            const std::string &Reason) {
    Finding F;
    F.RuleId = "R10";
    F.FilePath = File;
    F.Line = Line;
    F.Column = 1;
    F.ReportId = Id.str();
    F.NotRewrittenReason = Reason;
    F.Message = Reason;
    Out.Findings.push_back(std::move(F));
  }

  void insert(const ListFile &File, unsigned Offset, const std::string &Text,
              const std::string &What) {
    Insertions[{File.Path, Offset}] += Text;
    Finding F;
    F.RuleId = "R10";
    F.FilePath = File.Path;
    F.Offset = Offset;
    F.Line = 1 + llvm::StringRef(File.Text).take_front(Offset).count('\n');
    F.Column = 1;
    F.Message = What;
    Out.Findings.push_back(std::move(F));
  }

  /// The directory of Dir's add_subdirectory tree that has no parent.
  size_t topDirectory(size_t Dir) const {
    for (size_t Steps = 0;
         Steps <= Model->Directories.size() && Model->Directories[Dir].Parent;
         ++Steps)
      Dir = *Model->Directories[Dir].Parent;
    return Dir;
  }

  /// Dir and its parents, nearest first.
  std::vector<size_t> chainOf(size_t Dir) const {
    std::vector<size_t> Chain;
    for (std::optional<size_t> At = Dir;
         At && *At < Model->Directories.size() &&
         Chain.size() <= Model->Directories.size();
         At = Model->Directories[*At].Parent)
      Chain.push_back(*At);
    return Chain;
  }

  /// The nearest directory whose subtree holds every directory of Dirs
  /// (imported targets are scoped to the directory of their find_package
  /// and its subdirectories).
  size_t commonAncestor(const std::set<size_t> &Dirs) const {
    std::vector<size_t> Common = chainOf(*Dirs.begin());
    for (size_t Dir : Dirs) {
      std::vector<size_t> Chain = chainOf(Dir);
      std::set<size_t> Above(Chain.begin(), Chain.end());
      llvm::erase_if(Common, [&](size_t D) { return !Above.count(D); });
    }
    return Common.empty() ? topDirectory(*Dirs.begin()) : Common.front();
  }

  /// A module that CMake's include() read for a directory of the chain
  /// (directly, or through another module).
  struct IncludedModule {
    ListFile *File = nullptr; ///< Read; may lie outside the root.
    /// The include() on the way to File nearest to it in a file under the
    /// root: where the package is found when File itself cannot be edited.
    ListFile *ViaFile = nullptr;
    size_t ViaCommand = 0;
  };

  /// Value with the variables the walk knows expanded (`${NAME}`, escapes);
  /// none when it names another, `$ENV{}`, `$CACHE{}` or a generator
  /// expression.
  static std::optional<std::string>
  expand(llvm::StringRef Value,
         const std::map<std::string, std::string> &Vars) {
    std::string Result;
    for (size_t I = 0; I < Value.size();) {
      llvm::StringRef Rest = Value.drop_front(I);
      if (Rest.starts_with("${")) {
        size_t End = Rest.find('}');
        if (End == llvm::StringRef::npos)
          return std::nullopt;
        llvm::StringRef Name = Rest.slice(2, End);
        auto Known = Vars.find(Name.str());
        if (Name.contains('$') || Known == Vars.end())
          return std::nullopt;
        Result += Known->second;
        I += End + 1;
        continue;
      }
      if (Rest.starts_with("$ENV{") || Rest.starts_with("$CACHE{") ||
          Rest.starts_with("$<"))
        return std::nullopt;
      if (Rest[0] == '\\' && Rest.size() > 1) {
        Result += Rest[1];
        I += 2;
        continue;
      }
      Result += Rest[0];
      ++I;
    }
    return Result;
  }

  static std::vector<std::string> listItems(llvm::StringRef List) {
    llvm::SmallVector<llvm::StringRef, 8> Items;
    List.split(Items, ';', -1, /*KeepEmpty=*/false);
    return std::vector<std::string>(Items.begin(), Items.end());
  }

  static std::string realOrNormal(llvm::StringRef Dir, llvm::StringRef Path) {
    std::string Normal = normalise(Dir, Path);
    llvm::SmallString<256> Real;
    if (!llvm::sys::fs::real_path(Normal, Real))
      return Real.str().str();
    return Normal;
  }

  /// The file `include(Arg)` reads, as CMake resolves it: a name that is no
  /// absolute path is first looked for as `<name>.cmake` in each folder of
  /// CMAKE_MODULE_PATH, then taken as a path relative to the current source
  /// folder. None when Arg cannot be expanded or names no file.
  static std::optional<std::string>
  resolveInclude(llvm::StringRef Arg, llvm::StringRef SourceDir,
                 const std::map<std::string, std::string> &Vars) {
    std::optional<std::string> Name = expand(Arg, Vars);
    if (!Name || Name->empty())
      return std::nullopt;
    if (!llvm::sys::path::is_absolute(*Name)) {
      auto ModulePath = Vars.find("CMAKE_MODULE_PATH");
      if (ModulePath != Vars.end())
        for (const std::string &Dir : listItems(ModulePath->second)) {
          llvm::SmallString<256> Candidate(Dir);
          llvm::sys::path::append(Candidate, *Name + ".cmake");
          std::string Path = normalise(SourceDir, Candidate);
          if (llvm::sys::fs::exists(Path))
            return realOrNormal(SourceDir, Path);
        }
    }
    std::string Path = normalise(SourceDir, *Name);
    if (llvm::sys::fs::exists(Path))
      return realOrNormal(SourceDir, Path);
    return std::nullopt;
  }

  /// What set(), list() and get_filename_component() at File's top level
  /// (not in a function's or macro's body) do to the variables the walk
  /// tracks; a value it cannot expand leaves the variable unknown.
  static void track(const CMakeCommand &C, llvm::StringRef SourceDir,
                    std::map<std::string, std::string> &Vars) {
    if (C.Args.empty())
      return;
    const std::string &Var = C.Args[0].Value;
    if (C.Name == "unset") {
      Vars.erase(Var);
      return;
    }
    if (C.Name == "set") {
      std::vector<std::string> Values;
      bool Cache = false;
      for (const CMakeArgument &Arg : llvm::ArrayRef(C.Args).drop_front()) {
        if (Arg.Kind == CMakeArgument::Unquoted && Arg.Value == "PARENT_SCOPE")
          return;
        if (Arg.Kind == CMakeArgument::Unquoted && Arg.Value == "CACHE") {
          Cache = true;
          break;
        }
        std::optional<std::string> Value = expand(Arg.Value, Vars);
        if (!Value) {
          Vars.erase(Var);
          return;
        }
        Values.push_back(std::move(*Value));
      }
      // A cache entry does not hide a normal variable of the same name.
      if (Cache && Vars.count(Var))
        return;
      if (Values.empty())
        Vars.erase(Var);
      else
        Vars[Var] = llvm::join(Values, ";");
      return;
    }
    if (C.Name == "list" && C.Args.size() >= 2) {
      llvm::StringRef Op = C.Args[0].Value;
      const std::string &List = C.Args[1].Value;
      size_t First = Op == "INSERT" ? 3 : 2;
      if (Op != "APPEND" && Op != "PREPEND" && Op != "INSERT")
        return;
      // Items that cannot be expanded are left out: the folders that remain
      // are still searched.
      std::vector<std::string> Items;
      for (size_t A = First; A < C.Args.size(); ++A)
        if (std::optional<std::string> Value = expand(C.Args[A].Value, Vars))
          for (std::string &Item : listItems(*Value))
            Items.push_back(std::move(Item));
      std::vector<std::string> Old;
      if (auto Known = Vars.find(List); Known != Vars.end())
        Old = listItems(Known->second);
      if (Op == "APPEND") {
        Old.insert(Old.end(), Items.begin(), Items.end());
      } else {
        size_t At = 0;
        if (Op == "INSERT" &&
            (C.Args.size() < 3 ||
             llvm::StringRef(C.Args[2].Value).getAsInteger(10, At) ||
             At > Old.size()))
          At = Old.size();
        Old.insert(Old.begin() + At, Items.begin(), Items.end());
      }
      Vars[List] = llvm::join(Old, ";");
      return;
    }
    if (C.Name == "get_filename_component" && C.Args.size() >= 3) {
      std::optional<std::string> File = expand(C.Args[1].Value, Vars);
      llvm::StringRef Mode = C.Args[2].Value;
      if (!File || Mode.starts_with("NAME") || Mode == "EXT" ||
          Mode == "LAST_EXT" || Mode == "PROGRAM") {
        Vars.erase(Var);
        return;
      }
      if (Mode == "DIRECTORY" || Mode == "PATH")
        Vars[Var] = llvm::sys::path::parent_path(*File).str();
      else if (Mode == "REALPATH")
        Vars[Var] = realOrNormal(SourceDir, *File);
      else
        Vars[Var] = normalise(SourceDir, *File);
    }
  }

  /// Follows the include() commands of File (read for the directory
  /// SourceDir) into the modules CMake read, recording each in Out once.
  void walkIncludes(ListFile *File, const std::string &SourceDir,
                    std::map<std::string, std::string> &Vars,
                    std::optional<std::pair<ListFile *, size_t>> Via,
                    unsigned Depth, std::vector<IncludedModule> &Out) {
    // An include() cycle does not configure; the bound keeps ddpify safe.
    if (!File || !File->ParseError.empty() || Depth > 32)
      return;
    std::string ListDir = llvm::sys::path::parent_path(File->Path).str();
    unsigned Body = 0;
    bool Editable = isPathUnder(File->Path, Root);
    for (size_t I = 0; I < File->Commands.size(); ++I) {
      const CMakeCommand &C = File->Commands[I];
      if (C.Name == "function" || C.Name == "macro") {
        ++Body;
        continue;
      }
      if ((C.Name == "endfunction" || C.Name == "endmacro") && Body) {
        --Body;
        continue;
      }
      Vars["CMAKE_CURRENT_LIST_DIR"] = ListDir;
      Vars["CMAKE_CURRENT_LIST_FILE"] = File->Path;
      if (C.Name == "project" && !Body && !C.Args.empty()) {
        Vars["PROJECT_SOURCE_DIR"] = SourceDir;
        Vars[C.Args[0].Value + "_SOURCE_DIR"] = SourceDir;
        continue;
      }
      if (C.Name != "include" || C.Args.empty()) {
        if (!Body)
          track(C, SourceDir, Vars);
        continue;
      }
      std::optional<std::string> Path =
          resolveInclude(C.Args[0].Value, SourceDir, Vars);
      if (!Path)
        continue;
      ListFile *Module = read(*Path);
      // Only what CMake read (not a module of a branch the configured build
      // does not take), where the File API lists the files CMake read.
      if (!Module || (!Model->ListFiles.empty() &&
                      !llvm::is_contained(Model->ListFiles, *Path) &&
                      !llvm::is_contained(Model->ExternalListFiles, *Path)))
        continue;
      std::optional<std::pair<ListFile *, size_t>> Next =
          Editable ? std::make_optional(std::make_pair(File, I)) : Via;
      if (Next && !llvm::any_of(Out, [&](const IncludedModule &M) {
            return M.File == Module;
          }))
        Out.push_back({Module, Next->first, Next->second});
      walkIncludes(Module, SourceDir, Vars, Next, Depth + 1, Out);
    }
  }

  /// The modules the CMakeLists.txt of the directories ChainDirs (nearest
  /// first) include(), and those they include in turn, as CMake resolves
  /// include(): a path, or a module name searched in CMAKE_MODULE_PATH
  /// (from the cache, set() or list() in these files and their parents,
  /// `${CMAKE_CURRENT_LIST_DIR}` and the like expanded). The nearest
  /// directory's modules come first.
  std::vector<IncludedModule>
  includedModules(llvm::ArrayRef<size_t> ChainDirs) {
    std::map<std::string, std::string> Vars = {
        {"CMAKE_SOURCE_DIR", Model->SourceDir},
        {"CMAKE_HOME_DIRECTORY", Model->SourceDir},
        {"PROJECT_SOURCE_DIR", Model->SourceDir},
        {"CMAKE_BINARY_DIR", Model->BuildDir}};
    if (!Model->CacheModulePath.empty())
      Vars["CMAKE_MODULE_PATH"] = Model->CacheModulePath;
    std::vector<std::vector<IncludedModule>> PerDirectory(ChainDirs.size());
    // Variables flow from a directory to its subdirectories: the top first.
    for (size_t Rank = ChainDirs.size(); Rank-- > 0;) {
      const std::string &Dir = Model->Directories[ChainDirs[Rank]].Source;
      llvm::SmallString<256> Path(Dir);
      llvm::sys::path::append(Path, "CMakeLists.txt");
      Vars["CMAKE_CURRENT_SOURCE_DIR"] = Dir;
      walkIncludes(read(Path.str().str()), Dir, Vars, std::nullopt, 0,
                   PerDirectory[Rank]);
    }
    std::vector<IncludedModule> Modules;
    for (std::vector<IncludedModule> &Found : PerDirectory)
      for (IncludedModule &Module : Found)
        if (!llvm::any_of(Modules, [&](const IncludedModule &M) {
              return M.File == Module.File;
            }))
          Modules.push_back(Module);
    return Modules;
  }

  /// Whether a CMakeLists.txt of Chain include()s the module Path (by its
  /// path or its name, `include(libtorch)` with CMAKE_MODULE_PATH).
  static bool includedBy(const std::vector<ListFile *> &Chain,
                         llvm::StringRef Path) {
    llvm::StringRef Stem = llvm::sys::path::stem(Path);
    for (const ListFile *File : Chain)
      for (const CMakeCommand &C : File->Commands)
        if (C.Name == "include" && !C.Args.empty()) {
          llvm::StringRef Arg = C.Args.front().Value;
          if (llvm::sys::path::stem(Arg) == Stem ||
              llvm::sys::path::filename(Arg) == llvm::sys::path::filename(Path))
            return true;
        }
    return false;
  }

  /// Where the File API shows the project finding Torch for a target that
  /// links the runtime: the find_package call that read TorchConfig.cmake
  /// (in a CMakeLists.txt, an include()d module, a module another includes,
  /// a function's body), or, for a module outside the root, the call under
  /// the root that reached it (its include()). Only one whose directory is
  /// in Chain (the nearest first) counts: imported targets are scoped to it.
  /// Sets Done when one of the files on that way finds ddpify already.
  struct TorchFind {
    ListFile *File = nullptr;
    size_t Command = 0;
    std::string Outside; ///< The module outside the root, if any.
  };
  std::optional<TorchFind>
  torchFindFromFileApi(llvm::ArrayRef<std::string> Chain, bool &Done) {
    std::optional<TorchFind> Best;
    size_t BestRank = Chain.size();
    for (const CMakeTarget *Target : LinkingTargets)
      for (const std::vector<CMakeFrame> &Frames : Target->TorchFinds) {
        const CMakeFrame &Top = Frames.back();
        size_t Rank = llvm::find(Chain, Top.File) - Chain.begin();
        if (!Top.Command.empty() || Rank >= BestRank)
          continue;
        std::optional<TorchFind> Found;
        for (const CMakeFrame &Frame : Frames) {
          ListFile *File = load(Frame.File);
          if (!File || !File->ParseError.empty())
            continue;
          if (File->FindsDdpify) {
            Done = true;
            return std::nullopt;
          }
          if (Found || Frame.Command.empty())
            continue;
          std::optional<size_t> Command = commandAt(*File, Frame);
          if (!Command)
            break; // Not what CMake ran: the text heuristics decide.
          Found = TorchFind{File, *Command, ""};
          if (&Frame != &Frames.front())
            Found->Outside = Frames.front().File;
        }
        if (Found)
          Best = std::move(Found), BestRank = Rank;
      }
    return Best;
  }

  /// `find_package(ddpify REQUIRED)` once, where every target linking
  /// ddpify::runtime sees it: in the nearest common ancestor of their
  /// directories or above it, beside the find_package(Torch) that CMake's
  /// backtraces show (torchFindFromFileApi), else after find_package(Torch)
  /// in its CMakeLists.txt or a parent's (nearest first), else in a module
  /// that finds Torch and that one of those include()s, by path or by name
  /// through CMAKE_MODULE_PATH (includedModules; after that include() for a
  /// module outside the root), else after project(). A find_package(ddpify) in
  /// a sibling directory does not count.
  void findPackage() {
    if (LinkingDirectories.empty())
      return;
    std::vector<ListFile *> Chain;
    std::vector<std::string> ChainPaths;
    std::vector<size_t> ChainDirs = chainOf(commonAncestor(LinkingDirectories));
    for (size_t Dir : ChainDirs) {
      llvm::SmallString<256> Path(Model->Directories[Dir].Source);
      llvm::sys::path::append(Path, "CMakeLists.txt");
      ChainPaths.push_back(Path.str().str());
      if (ListFile *File = load(Path.str().str()))
        Chain.push_back(File);
    }
    // The modules include() reads, as CMake resolves it; then, for an
    // include() the walk cannot resolve (a variable it does not know), a
    // file of the project CMake read whose name it names.
    std::vector<IncludedModule> Included = includedModules(ChainDirs);
    for (const std::string &Path : Model->ListFiles)
      if (!llvm::is_contained(ChainPaths, Path) &&
          llvm::sys::path::filename(Path) != "CMakeLists.txt" &&
          isBuildFile(Path) && includedBy(Chain, Path))
        if (ListFile *File = load(Path))
          if (!llvm::any_of(Included, [&](const IncludedModule &M) {
                return M.File == File;
              }))
            Included.push_back({File, File, 0});
    for (ListFile *File : Chain)
      if (File->FindsDdpify)
        return;
    for (const IncludedModule &Module : Included)
      if (Module.File->FindsDdpify)
        return;
    ListFile *Anchor = nullptr;
    std::optional<size_t> Command;
    std::string Outside;
    bool Done = false;
    if (std::optional<TorchFind> Find = torchFindFromFileApi(ChainPaths, Done))
      Anchor = Find->File, Command = Find->Command, Outside = Find->Outside;
    if (Done)
      return;
    for (ListFile *File : Chain)
      if (!Anchor && File->FindTorch)
        Anchor = File, Command = File->FindTorch;
    // A module outside the root is not edited: the package is found after
    // the include() under the root that reached it.
    for (const IncludedModule &Module : Included) {
      if (Anchor || !Module.File->FindTorch)
        continue;
      if (isPathUnder(Module.File->Path, Root)) {
        Anchor = Module.File, Command = Module.File->FindTorch;
      } else {
        Anchor = Module.ViaFile, Command = Module.ViaCommand;
        Outside = Module.File->Path;
      }
    }
    for (ListFile *File : Chain)
      if (!Anchor && File->Project)
        Anchor = File, Command = File->Project;
    if (!Anchor) {
      if (NoFindPackageReported.insert(FirstLinkingFile).second)
        item(FirstLinkingFile, 1, "cmake-no-find-package",
             "neither find_package(Torch) nor project() in this "
             "CMakeLists.txt or its parents: add find_package(ddpify "
             "REQUIRED) before the targets that link ddpify::runtime");
      return;
    }
    const CMakeCommand &C = Anchor->Commands[*Command];
    std::string Indent = indentAt(Anchor->Text, C.Offset);
    // A project that sets CMAKE_PREFIX_PATH itself hides the
    // -DCMAKE_PREFIX_PATH=<ddpify> the migration guide says to pass (and the
    // user package registry may then give another ddpify, silently): the
    // cache's value goes in as hints, searched before the registry.
    auto Sets = [](const ListFile *F) { return F->SetsPrefixPath; };
    bool Hides =
        llvm::any_of(Chain, Sets) ||
        llvm::any_of(Included,
                     [&](const IncludedModule &M) { return Sets(M.File); }) ||
        Anchor->SetsPrefixPath;
    std::string Find = Hides ? "find_package(ddpify REQUIRED HINTS "
                               "$CACHE{CMAKE_PREFIX_PATH})"
                             : "find_package(ddpify REQUIRED)";
    std::string Text = "\n" + Indent + Find;
    if (Hides)
      Text = "\n" + Indent +
             "# HINTS: the -DCMAKE_PREFIX_PATH of the command line, which "
             "set(CMAKE_PREFIX_PATH ...) hides" +
             Text;
    insert(*Anchor, C.LineEnd, Text, Find);
    Anchor->FindsDdpify = true;
    // A module outside the root is not edited: the package is found after
    // the call that reached it, in the same scope; the user may rather edit
    // the module.
    if (!Outside.empty())
      Out.Notes.push_back("R10: '" + Outside +
                          "' finds Torch but is outside the root: " + Find +
                          " went into '" + relative(Anchor->Path, Root) +
                          "' after its " + C.Name + "() (line " +
                          std::to_string(C.Line) + ") instead");
  }

  /// The signature of the target_link_libraries calls that the project's
  /// functions and macros between the outermost call (Site) and the
  /// add_executable/add_library make for the target: calls after the
  /// command of each inner frame, up to the end of its function or macro,
  /// naming what that command names (`${name}`).
  void linkSignatureInside(const CMakeTarget &Target, const CMakeFrame &Site,
                           bool &HasKeyword, bool &HasPlain) {
    for (const CMakeFrame &Frame : Target.Definition) {
      if (&Frame == &Site)
        break;
      ListFile *File = load(Frame.File);
      if (!File || !File->ParseError.empty())
        continue;
      std::optional<size_t> At = commandAt(*File, Frame);
      if (!At || File->Commands[*At].Args.empty())
        continue;
      std::string Named = File->Commands[*At].Args.front().Value;
      for (size_t I = *At + 1; I < File->Commands.size(); ++I) {
        const CMakeCommand &C = File->Commands[I];
        if (C.Name == "endfunction" || C.Name == "endmacro")
          break;
        if (C.Name != "target_link_libraries" || C.Args.size() < 2 ||
            C.Args.front().Value != Named)
          continue;
        bool Keyword = llvm::any_of(
            llvm::ArrayRef(C.Args).drop_front(), [](const CMakeArgument &Arg) {
              return Arg.Kind == CMakeArgument::Unquoted &&
                     isKeyword(Arg.Value);
            });
        (Keyword ? HasKeyword : HasPlain) = true;
      }
    }
  }

  void linkTarget(const CMakeTarget &Target, const std::string &Keyword,
                  const std::string &ChangedSource) {
    const CMakeFrame *Site = definitionSite(Target);
    std::string Where = Site && !Site->File.empty()
                            ? Site->File + ":" + std::to_string(Site->Line)
                            : "no backtrace";
    if (!Site || !isPathUnder(Site->File, Root)) {
      item(ChangedSource, 1, "cmake-target-outside-root",
           "target '" + Target.Name + "' is defined outside the root (" +
               Where + "); link it to ddpify::runtime by hand");
      return;
    }
    ListFile *File = load(Site->File);
    if (!File || !File->ParseError.empty())
      return; // cmake-parse-error says why.
    std::optional<size_t> Definition = commandAt(*File, *Site);
    if (!Definition) {
      item(Site->File, Site->Line, "cmake-target-not-found",
           "CMake defines target '" + Target.Name + "' at " + Where +
               ", where ddpify reads no " + Site->Command +
               " call; link it to ddpify::runtime by hand");
      return;
    }

    // The name as written for the add_executable/add_library itself (one
    // inside a foreach() makes every target of the loop: each gets the
    // link, which is harmless, and none is named before it exists); the
    // concrete name after a macro's or function's call.
    const CMakeCommand &Defining = File->Commands[*Definition];
    std::string Name = Target.Name;
    if (Site == &Target.Definition.front() && !Defining.Args.empty()) {
      const CMakeArgument &Arg = Defining.Args.front();
      Name = File->Text.substr(Arg.Offset, Arg.Length);
    }

    // Its target_link_libraries after the call, in the same file.
    std::vector<LinkCall> Links;
    for (size_t I = *Definition + 1; I < File->Commands.size(); ++I) {
      const CMakeCommand &C = File->Commands[I];
      if (C.Name != "target_link_libraries" || C.Args.size() < 2)
        continue;
      const CMakeArgument &First = C.Args.front();
      if (First.Value != Target.Name &&
          File->Text.substr(First.Offset, First.Length) != Name)
        continue;
      LinkCall Link{I, false, false, false};
      for (const CMakeArgument &Arg : llvm::ArrayRef(C.Args).drop_front()) {
        if (Arg.Kind == CMakeArgument::Unquoted && isKeyword(Arg.Value))
          Link.Keyword = true;
        llvm::SmallVector<llvm::StringRef, 4> Items;
        llvm::StringRef(Arg.Value).split(Items, ';');
        Link.HasRuntime |= llvm::is_contained(Items, RuntimeTarget);
        // ${TORCH_LIBRARIES}, torch, Torch::Torch, ${TORCH_LIBS}.
        Link.LinksTorch |=
            llvm::StringRef(Arg.Value).contains_insensitive("torch");
      }
      Links.push_back(Link);
    }

    // The calls the configured build runs, as CMake's backtraces name them:
    // of `if(USE_X) target_link_libraries(app ... x) else()
    // target_link_libraries(app ...) endif()` the branch taken. Without a
    // backtrace naming one of them (calls that add no flag, an older CMake),
    // every call counts.
    std::vector<LinkCall> Taken;
    for (const LinkCall &Link : Links) {
      unsigned Line = File->Commands[Link.Command].Line;
      if (llvm::any_of(Target.LinkCalls, [&](const CMakeFrame &Frame) {
            return Frame.Line == Line && Frame.File == File->Path;
          }))
        Taken.push_back(Link);
    }
    bool Known = !Taken.empty();
    if (!Known)
      Taken = Links;
    if (llvm::any_of(Taken, [](const LinkCall &L) { return L.HasRuntime; }))
      return; // Linked already.
    if (!Linked.insert({File->Path, Name}).second)
      return;
    LinkingDirectories.insert(Target.Directory);
    LinkingTargets.push_back(&Target);
    // A library's PUBLIC or INTERFACE link reaches its users, wherever they
    // are: the package must be seen from the top.
    if (Keyword != "PRIVATE")
      LinkingDirectories.insert(topDirectory(Target.Directory));
    if (FirstLinkingFile.empty())
      FirstLinkingFile = File->Path;

    // The signature of every call, taken or not (a user who flips the
    // option runs the others).
    bool HasKeyword = false, HasPlain = false;
    for (const LinkCall &Link : Links)
      (Link.Keyword ? HasKeyword : HasPlain) = true;
    // A target made inside the project's function or macro may be linked
    // there too: a new call must use the same signature.
    if (Links.empty())
      linkSignatureInside(Target, *Site, HasKeyword, HasPlain);

    std::string What = "ddpify::runtime linked to '" + Target.Name + "'";
    size_t Anchor = addLink(*File, Taken, *Definition, Name, Keyword,
                            HasKeyword, HasPlain, What);

    // The other branches of the if() blocks around the calls the build runs
    // link the runtime as well where they link LibTorch: a configuration
    // that takes them (the option flipped, another build type) still builds.
    std::vector<size_t> Runs;
    if (Known)
      for (const LinkCall &Link : Taken)
        Runs.push_back(Link.Command);
    Runs.push_back(Anchor);
    for (const LinkCall &Link : Links) {
      if (Link.HasRuntime || !Link.LinksTorch ||
          llvm::is_contained(Runs, Link.Command) ||
          !llvm::any_of(Runs, [&](size_t Run) {
            return exclusive(*File, Link.Command, Run);
          }))
        continue;
      addLink(*File, {Link}, Link.Command, Name, Keyword, HasKeyword, HasPlain,
              What + " (in a branch the configured build does not take)");
    }
  }

  /// Links Name to the runtime through Calls, its target_link_libraries
  /// calls of File: into the <Keyword> list of one (keyword signature) or
  /// the last (plain signature), else a new call after the last of them or,
  /// with none, after command After. Returns the command edited or followed.
  size_t addLink(ListFile &File, llvm::ArrayRef<LinkCall> Calls, size_t After,
                 const std::string &Name, const std::string &Keyword,
                 bool HasKeyword, bool HasPlain, const std::string &What) {
    // Into an existing list: after the last item of the call's <Keyword>
    // section (keyword signature) or of the last call (plain signature).
    std::optional<std::pair<size_t, size_t>> Into; // command, argument
    if (HasKeyword) {
      for (const LinkCall &Link : Calls) {
        const CMakeCommand &C = File.Commands[Link.Command];
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
    } else if (HasPlain && !Calls.empty()) {
      size_t Command = Calls.back().Command;
      Into = {Command, File.Commands[Command].Args.size() - 1};
    }

    const std::string &Text = File.Text;
    if (Into) {
      const CMakeCommand &C = File.Commands[Into->first];
      const CMakeArgument &Arg = C.Args[Into->second];
      unsigned After = Arg.Offset + Arg.Length;
      // One item per line stays so: a new line, indented as that item.
      std::string Indent = indentAt(Text, Arg.Offset);
      bool OwnLine =
          Arg.Offset == (Text.rfind('\n', Arg.Offset) + 1) + Indent.size();
      unsigned CloseLineStart = Text.rfind('\n', C.Close) + 1;
      // Past a comment that ends the item's line.
      unsigned LineEnd = cmakeLineEnd(Text, After);
      bool EndsLine = LineEnd == Text.size() || Text[LineEnd] == '\n' ||
                      Text[LineEnd] == '\r';
      if (OwnLine && EndsLine && After <= CloseLineStart)
        insert(File, LineEnd, "\n" + Indent + RuntimeTarget.str(), What);
      else
        insert(File, After, " " + RuntimeTarget.str(), What);
      return Into->first;
    }
    // A new call, after the target's last target_link_libraries or the call
    // that made it.
    size_t Command = Calls.empty() ? After : Calls.back().Command;
    const CMakeCommand &C = File.Commands[Command];
    std::string Call = "target_link_libraries(" + Name + " " +
                       (HasPlain ? "" : Keyword + " ") + RuntimeTarget.str() +
                       ")";
    insert(File, C.LineEnd, "\n" + indentAt(Text, C.Offset) + Call, What);
    return Command;
  }

  std::string Root;
  std::string BuildDir;
  CMakeMigration &Out;
  const CMakeCodeModel *Model = nullptr;
  std::map<std::string, std::unique_ptr<ListFile>> Files;
  /// (file, name as written) of the links added: a call that makes several
  /// targets under one written name gets one link.
  std::set<std::pair<std::string, std::string>> Linked;
  std::map<std::pair<std::string, unsigned>, std::string> Insertions;
  std::set<std::string> NoFindPackageReported;
  /// The directories of the targets that link ddpify::runtime, and the file
  /// of the first link (for an item).
  std::set<size_t> LinkingDirectories;
  std::vector<const CMakeTarget *> LinkingTargets;
  std::string FirstLinkingFile;
};

} // namespace

CMakeMigration migrateCMake(llvm::ArrayRef<std::string> ChangedFiles,
                            llvm::StringRef Root, llvm::StringRef BuildDir) {
  CMakeMigration Out;
  Migrator(Root, BuildDir, Out).run(ChangedFiles);
  return Out;
}

} // namespace ddpify
