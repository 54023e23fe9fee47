//===- CMakeFileApiReply.cpp - a File API reply, read ---------------------===//
//
// The reading of CMake's reply apart from the files it is in: its input is
// what a build folder holds, so it is fuzzed (fuzz/cmake_file_api.cpp).
//
//===----------------------------------------------------------------------===//

#include "ddpify/CMakeFileApi.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace ddpify {
namespace {

llvm::Error failure(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message.str());
}

std::string absoluteIn(llvm::StringRef Dir, llvm::StringRef Path) {
  llvm::SmallString<256> Result(Path);
  llvm::sys::fs::make_absolute(Dir, Result);
  llvm::sys::path::remove_dots(Result, /*remove_dot_dot=*/true);
  // Changed files are real paths; a symlinked source folder must match them.
  llvm::SmallString<256> Real;
  if (!llvm::sys::fs::real_path(Result, Real))
    return Real.str().str();
  return Result.str().str();
}

/// The reply file Name, which must hold a JSON object.
llvm::Expected<llvm::json::Value> readJson(llvm::StringRef Name,
                                           CMakeReplyReader ReadReplyFile) {
  llvm::Expected<std::string> Text = ReadReplyFile(Name);
  if (!Text)
    return Text.takeError();
  llvm::Expected<llvm::json::Value> Value = llvm::json::parse(*Text);
  if (!Value)
    return failure(Name + ": " + llvm::toString(Value.takeError()));
  if (!Value->getAsObject())
    return failure(Name + ": not a JSON object");
  return Value;
}

/// The jsonFile of the response of Kind (major version Major) to ddpify's
/// query.
llvm::Expected<std::string> responseFile(const llvm::json::Object &Index,
                                         llvm::StringRef Kind, int64_t Major) {
  const llvm::json::Object *Reply = Index.getObject("reply");
  const llvm::json::Object *Client =
      Reply ? Reply->getObject("client-ddpify") : nullptr;
  const llvm::json::Object *Query =
      Client ? Client->getObject("query.json") : nullptr;
  if (!Query)
    return failure("the File API reply does not answer ddpify's query");
  if (std::optional<llvm::StringRef> Error = Query->getString("error"))
    return failure("CMake rejected ddpify's query: " + *Error);
  if (const llvm::json::Array *Responses = Query->getArray("responses"))
    for (const llvm::json::Value &Response : *Responses) {
      const llvm::json::Object *R = Response.getAsObject();
      if (!R || R->getString("kind") != Kind)
        continue;
      if (std::optional<llvm::StringRef> Error = R->getString("error"))
        return failure("CMake has no " + Kind + " reply: " + *Error);
      const llvm::json::Object *Version = R->getObject("version");
      std::optional<llvm::StringRef> File = R->getString("jsonFile");
      if (Version && Version->getInteger("major") == Major && File)
        return File->str();
    }
  return failure("CMake has no " + Kind + " v" + llvm::Twine(Major) + " reply");
}

/// A target's backtraceGraph (cmake-file-api(7)): its nodes, commands and
/// files, or none when one of them is missing.
struct BacktraceGraph {
  const llvm::json::Array *Nodes = nullptr, *Commands = nullptr,
                          *Files = nullptr;
  llvm::StringRef SourceDir;

  BacktraceGraph(const llvm::json::Object &Target, llvm::StringRef SourceDir)
      : SourceDir(SourceDir) {
    if (const llvm::json::Object *Graph = Target.getObject("backtraceGraph")) {
      Nodes = Graph->getArray("nodes");
      Commands = Graph->getArray("commands");
      Files = Graph->getArray("files");
    }
  }
  bool valid() const { return Nodes && Commands && Files; }

  const llvm::json::Object *node(std::optional<int64_t> Index) const {
    if (!valid() || !Index || *Index < 0 ||
        static_cast<size_t>(*Index) >= Nodes->size())
      return nullptr;
    return (*Nodes)[*Index].getAsObject();
  }

  CMakeFrame frame(const llvm::json::Object &N) const {
    CMakeFrame Frame;
    std::optional<int64_t> File = N.getInteger("file");
    if (File && *File >= 0 && static_cast<size_t>(*File) < Files->size())
      if (std::optional<llvm::StringRef> Path = (*Files)[*File].getAsString())
        Frame.File = absoluteIn(SourceDir, *Path);
    Frame.Line = N.getInteger("line").value_or(0);
    std::optional<int64_t> Command = N.getInteger("command");
    if (Command && *Command >= 0 &&
        static_cast<size_t>(*Command) < Commands->size())
      if (std::optional<llvm::StringRef> Name =
              (*Commands)[*Command].getAsString())
        Frame.Command = Name->lower();
    return Frame;
  }

  /// Frames from Node up to the top.
  std::vector<CMakeFrame> backtrace(std::optional<int64_t> Node) const {
    std::vector<CMakeFrame> Frames;
    // Parents come first in the array; the bound guards a malformed cycle.
    for (size_t Steps = 0; Steps <= (valid() ? Nodes->size() : 0); ++Steps) {
      const llvm::json::Object *N = node(Node);
      if (!N)
        break;
      Frames.push_back(frame(*N));
      Node = N->getInteger("parent");
    }
    return Frames;
  }
};

/// The graph's target_link_libraries calls, and the find_package calls that
/// read TorchConfig.cmake (the parents of its file frames).
void linksAndTorchFinds(const BacktraceGraph &Graph, CMakeTarget &Target) {
  if (!Graph.valid())
    return;
  for (const llvm::json::Value &Value : *Graph.Nodes) {
    const llvm::json::Object *N = Value.getAsObject();
    if (!N)
      continue;
    CMakeFrame Frame = Graph.frame(*N);
    if (Frame.Command == "target_link_libraries") {
      Target.LinkCalls.push_back(std::move(Frame));
      continue;
    }
    llvm::StringRef Name = llvm::sys::path::filename(Frame.File);
    if (!Frame.Command.empty() ||
        (Name != "TorchConfig.cmake" && Name != "torch-config.cmake"))
      continue;
    std::vector<CMakeFrame> Find = Graph.backtrace(N->getInteger("parent"));
    if (!Find.empty() && Find.front().Command == "find_package")
      Target.TorchFinds.push_back(std::move(Find));
  }
}

llvm::Expected<CMakeTarget> readTarget(llvm::StringRef JsonFile,
                                       llvm::StringRef SourceDir,
                                       CMakeReplyReader ReadReplyFile) {
  llvm::Expected<llvm::json::Value> Value = readJson(JsonFile, ReadReplyFile);
  if (!Value)
    return Value.takeError();
  const llvm::json::Object &Object = *Value->getAsObject();
  CMakeTarget Target;
  Target.Name = Object.getString("name").value_or("").str();
  Target.Type = Object.getString("type").value_or("").str();
  if (Target.Name.empty() || Target.Type.empty())
    return failure(JsonFile + ": a target without a name or type");
  if (const llvm::json::Array *Sources = Object.getArray("sources"))
    for (const llvm::json::Value &Source : *Sources)
      if (const llvm::json::Object *S = Source.getAsObject())
        if (std::optional<llvm::StringRef> SourcePath = S->getString("path"))
          Target.Sources.push_back(absoluteIn(SourceDir, *SourcePath));
  BacktraceGraph Graph(Object, SourceDir);
  Target.Definition = Graph.backtrace(Object.getInteger("backtrace"));
  linksAndTorchFinds(Graph, Target);
  return Target;
}

} // namespace

llvm::Expected<CMakeCodeModel> parseCMakeReply(llvm::StringRef IndexName,
                                               CMakeReplyReader ReadReplyFile) {
  llvm::Expected<llvm::json::Value> Index = readJson(IndexName, ReadReplyFile);
  if (!Index)
    return Index.takeError();
  llvm::Expected<std::string> CodeModelFile =
      responseFile(*Index->getAsObject(), "codemodel", 2);
  if (!CodeModelFile)
    return CodeModelFile.takeError();
  llvm::Expected<llvm::json::Value> CodeModelValue =
      readJson(*CodeModelFile, ReadReplyFile);
  if (!CodeModelValue)
    return CodeModelValue.takeError();
  const llvm::json::Object &Root = *CodeModelValue->getAsObject();

  CMakeCodeModel Model;
  const llvm::json::Object *Paths = Root.getObject("paths");
  if (Paths) {
    Model.SourceDir = absoluteIn("/", Paths->getString("source").value_or(""));
    Model.BuildDir = absoluteIn("/", Paths->getString("build").value_or(""));
  }
  // Every configuration of a multi-config generator has the same targets
  // and sources (per-config sources are generator expressions): the first.
  const llvm::json::Array *Configurations = Root.getArray("configurations");
  const llvm::json::Object *Configuration =
      Configurations && !Configurations->empty()
          ? Configurations->front().getAsObject()
          : nullptr;
  if (!Paths || Model.SourceDir == "/" || !Configuration)
    return failure(*CodeModelFile + ": no source folder or configuration");

  // R10 follows a directory's parentIndex and a target's directoryIndex
  // without a check: each must name one of the directories.
  const llvm::json::Array *Directories = Configuration->getArray("directories");
  size_t DirectoryCount = Directories ? Directories->size() : 0;
  auto IsDirectory = [&](std::optional<int64_t> Index) {
    return Index && *Index >= 0 && static_cast<size_t>(*Index) < DirectoryCount;
  };
  if (Directories)
    for (const llvm::json::Value &Directory : *Directories) {
      const llvm::json::Object *D = Directory.getAsObject();
      CMakeDirectory Dir;
      if (D) {
        Dir.Source =
            absoluteIn(Model.SourceDir, D->getString("source").value_or("."));
        if (std::optional<int64_t> Parent = D->getInteger("parentIndex")) {
          if (!IsDirectory(Parent))
            return failure(*CodeModelFile + ": directory " +
                           llvm::Twine(Model.Directories.size()) +
                           " has parentIndex " + llvm::Twine(*Parent) +
                           ", which is none of its " +
                           llvm::Twine(DirectoryCount) + " directories");
          Dir.Parent = *Parent;
        }
      }
      Model.Directories.push_back(std::move(Dir));
    }
  if (const llvm::json::Array *Targets = Configuration->getArray("targets"))
    for (const llvm::json::Value &Entry : *Targets) {
      const llvm::json::Object *T = Entry.getAsObject();
      std::optional<llvm::StringRef> JsonFile =
          T ? T->getString("jsonFile") : std::nullopt;
      if (!JsonFile)
        return failure(*CodeModelFile + ": a target without its jsonFile");
      llvm::Expected<CMakeTarget> Target =
          readTarget(*JsonFile, Model.SourceDir, ReadReplyFile);
      if (!Target)
        return Target.takeError();
      std::optional<int64_t> Directory = T->getInteger("directoryIndex");
      if (!IsDirectory(Directory))
        return failure(*CodeModelFile + ": target '" + Target->Name +
                       "' has no directoryIndex into its " +
                       llvm::Twine(DirectoryCount) + " directories");
      Target->Directory = *Directory;
      Model.Targets.push_back(std::move(*Target));
    }

  // The include()d files: without them only the directories' CMakeLists.txt
  // would be searched for find_package(Torch). A module above the source
  // folder (include(libtorch) through CMAKE_MODULE_PATH pointing at
  // ../../cmake) is external, yet may be the project's own.
  llvm::Expected<std::string> FilesFile =
      responseFile(*Index->getAsObject(), "cmakeFiles", 1);
  if (!FilesFile) {
    llvm::consumeError(FilesFile.takeError());
    return Model;
  }
  llvm::Expected<llvm::json::Value> FilesValue =
      readJson(*FilesFile, ReadReplyFile);
  if (!FilesValue) {
    llvm::consumeError(FilesValue.takeError());
    return Model;
  }
  if (const llvm::json::Array *Inputs =
          FilesValue->getAsObject()->getArray("inputs"))
    for (const llvm::json::Value &Input : *Inputs) {
      const llvm::json::Object *I = Input.getAsObject();
      if (!I || I->getBoolean("isGenerated").value_or(false) ||
          I->getBoolean("isCMake").value_or(false))
        continue;
      if (std::optional<llvm::StringRef> Path = I->getString("path"))
        (I->getBoolean("isExternal").value_or(false) ? Model.ExternalListFiles
                                                     : Model.ListFiles)
            .push_back(absoluteIn(Model.SourceDir, *Path));
    }
  return Model;
}

} // namespace ddpify
