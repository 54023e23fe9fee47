//===- CMakeFileApi.cpp - targets from CMake's File API -------------------===//

#include "ddpify/CMakeFileApi.h"
#include "ddpify/AtomicFile.h"
#include "ddpify/EditSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include <algorithm>

namespace ddpify {
namespace {

constexpr llvm::StringLiteral ClientQuery =
    R"({"requests":[{"kind":"codemodel","version":2},)"
    R"({"kind":"cmakeFiles","version":1}]})";

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

llvm::Expected<llvm::json::Value> readJson(llvm::StringRef Path) {
  llvm::Expected<std::string> Text = readFile(Path);
  if (!Text)
    return Text.takeError();
  llvm::Expected<llvm::json::Value> Value = llvm::json::parse(*Text);
  if (!Value)
    return failure(llvm::sys::path::filename(Path) + ": " +
                   llvm::toString(Value.takeError()));
  if (!Value->getAsObject())
    return failure(llvm::sys::path::filename(Path) + ": not a JSON object");
  return Value;
}

/// The value of KEY:TYPE=VALUE in a CMakeCache.txt.
std::string cacheEntry(llvm::StringRef Cache, llvm::StringRef Key) {
  llvm::SmallVector<llvm::StringRef, 0> Lines;
  Cache.split(Lines, '\n');
  for (llvm::StringRef Line : Lines) {
    if (!Line.consume_front(Key) || !Line.consume_front(":"))
      continue;
    size_t Equals = Line.find('=');
    if (Equals != llvm::StringRef::npos)
      return Line.substr(Equals + 1).rtrim("\r").str();
  }
  return "";
}

std::string cacheText(llvm::StringRef BuildDir) {
  llvm::SmallString<256> CachePath(BuildDir);
  llvm::sys::path::append(CachePath, "CMakeCache.txt");
  llvm::Expected<std::string> Cache = readFile(CachePath);
  if (!Cache) {
    llvm::consumeError(Cache.takeError());
    return "";
  }
  return *Cache;
}

/// The cmake that configured BuildDir (the same version reads its cache),
/// else the first one on PATH.
llvm::Expected<std::string> cmakeProgram(llvm::StringRef Cache) {
  std::string Configured = cacheEntry(Cache, "CMAKE_COMMAND");
  if (!Configured.empty() && llvm::sys::fs::can_execute(Configured))
    return Configured;
  if (llvm::ErrorOr<std::string> OnPath = llvm::sys::findProgramByName("cmake"))
    return *OnPath;
  return failure("no cmake program found (CMAKE_COMMAND in CMakeCache.txt, "
                 "PATH)");
}

llvm::Error writeQuery(llvm::StringRef BuildDir) {
  llvm::SmallString<256> Dir(BuildDir);
  llvm::sys::path::append(Dir, ".cmake", "api", "v1", "query");
  llvm::sys::path::append(Dir, "client-ddpify");
  if (std::error_code EC = llvm::sys::fs::create_directories(Dir))
    return failure("cannot create " + Dir + ": " + EC.message());
  llvm::SmallString<256> Path(Dir);
  llvm::sys::path::append(Path, "query.json");
  if (llvm::Expected<std::string> Existing = readFile(Path)) {
    if (*Existing == ClientQuery)
      return llvm::Error::success();
  } else {
    llvm::consumeError(Existing.takeError());
  }
  // Written whole, then renamed: cmake never sees half a query, and a full
  // disk leaves neither half a query nor its temporary.
  if (llvm::Error Err = writeFileAtomically(Path, ClientQuery))
    return failure(llvm::toString(std::move(Err)));
  return llvm::Error::success();
}

/// What a failed cmake said: its first `CMake Error` with the line of the
/// message below it, else its last line.
std::string whatCMakeSaid(llvm::StringRef LogPath) {
  llvm::Expected<std::string> Text = readFile(LogPath);
  if (!Text) {
    llvm::consumeError(Text.takeError());
    return "";
  }
  llvm::SmallVector<llvm::StringRef, 0> Lines;
  llvm::StringRef(*Text).split(Lines, '\n', -1, /*KeepEmpty=*/false);
  for (size_t I = 0; I < Lines.size(); ++I) {
    if (!Lines[I].starts_with("CMake Error"))
      continue;
    std::string Said = Lines[I].trim().str();
    if (I + 1 < Lines.size() && Lines[I + 1].starts_with(" "))
      Said += " " + Lines[I + 1].trim().str();
    return Said;
  }
  for (auto Line = Lines.rbegin(); Line != Lines.rend(); ++Line)
    if (!Line->trim().empty())
      return Line->trim().str();
  return "";
}

/// `cmake -S <source> -B <build>`: the source folder named, so a cache that
/// lost it never makes cmake configure the current folder.
llvm::Error rerunCMake(llvm::StringRef BuildDir) {
  std::string Cache = cacheText(BuildDir);
  std::string SourceDir = cacheEntry(Cache, "CMAKE_HOME_DIRECTORY");
  llvm::Expected<std::string> CMake = cmakeProgram(Cache);
  if (!CMake)
    return CMake.takeError();
  llvm::SmallString<128> Log;
  if (std::error_code EC =
          llvm::sys::fs::createTemporaryFile("ddpify-cmake", "log", Log))
    return failure("cannot create a temporary file: " + EC.message());
  llvm::StringRef LogRef = Log;
  std::optional<llvm::StringRef> Redirects[] = {std::nullopt, LogRef, LogRef};
  std::string Message;
  llvm::StringRef Args[] = {*CMake, "-S", SourceDir, "-B", BuildDir};
  // A configure that hangs (a download, a prompt) must not hang ddpify.
  unsigned Timeout = 900;
  if (std::optional<std::string> Set =
          llvm::sys::Process::GetEnv("DDPIFY_CMAKE_TIMEOUT"))
    if (llvm::StringRef(*Set).getAsInteger(10, Timeout) || Timeout == 0)
      Timeout = 900;
  int Status = llvm::sys::ExecuteAndWait(*CMake, Args, std::nullopt, Redirects,
                                         Timeout, /*MemoryLimit=*/0, &Message);
  std::string Said = whatCMakeSaid(Log);
  llvm::sys::fs::remove(Log);
  if (Status == 0)
    return llvm::Error::success();
  if (Status == -2)
    return failure("re-running cmake there did not finish within " +
                   std::to_string(Timeout) +
                   " s (DDPIFY_CMAKE_TIMEOUT sets the limit)" +
                   (Said.empty() ? "" : "; its last line: " + Said));
  std::string Why = Status < 0 ? Message : "exit " + std::to_string(Status);
  return failure("re-running cmake there failed (" + Why + ")" +
                 (Said.empty() ? "" : ": " + Said));
}

/// The reply index CMake wrote last (the lexicographically greatest name).
llvm::Expected<std::string> latestIndex(llvm::StringRef ReplyDir) {
  std::string Latest;
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator It(ReplyDir, EC), End;
       It != End && !EC; It.increment(EC)) {
    llvm::StringRef Name = llvm::sys::path::filename(It->path());
    if (Name.starts_with("index-") && Name.ends_with(".json") &&
        Name > llvm::sys::path::filename(Latest))
      Latest = It->path();
  }
  if (Latest.empty())
    return failure("cmake wrote no File API reply (CMake 3.14 or later is "
                   "needed)");
  return Latest;
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

/// Frames from the target's definition node up to its outermost call.
std::vector<CMakeFrame> backtrace(const llvm::json::Object &Target,
                                  llvm::StringRef SourceDir) {
  std::vector<CMakeFrame> Frames;
  const llvm::json::Object *Graph = Target.getObject("backtraceGraph");
  std::optional<int64_t> Node = Target.getInteger("backtrace");
  if (!Graph || !Node)
    return Frames;
  const llvm::json::Array *Nodes = Graph->getArray("nodes");
  const llvm::json::Array *Commands = Graph->getArray("commands");
  const llvm::json::Array *Files = Graph->getArray("files");
  if (!Nodes || !Commands || !Files)
    return Frames;
  // Parents come first in the array; the bound guards a malformed cycle.
  for (size_t Steps = 0;
       Node && *Node >= 0 && static_cast<size_t>(*Node) < Nodes->size() &&
       Steps <= Nodes->size();
       ++Steps) {
    const llvm::json::Object *N = (*Nodes)[*Node].getAsObject();
    if (!N)
      break;
    CMakeFrame Frame;
    std::optional<int64_t> File = N->getInteger("file");
    if (File && *File >= 0 && static_cast<size_t>(*File) < Files->size())
      if (std::optional<llvm::StringRef> Path = (*Files)[*File].getAsString())
        Frame.File = absoluteIn(SourceDir, *Path);
    Frame.Line = N->getInteger("line").value_or(0);
    std::optional<int64_t> Command = N->getInteger("command");
    if (Command && *Command >= 0 &&
        static_cast<size_t>(*Command) < Commands->size())
      if (std::optional<llvm::StringRef> Name =
              (*Commands)[*Command].getAsString())
        Frame.Command = Name->lower();
    Frames.push_back(std::move(Frame));
    Node = N->getInteger("parent");
  }
  return Frames;
}

llvm::Expected<CMakeTarget> readTarget(llvm::StringRef ReplyDir,
                                       llvm::StringRef JsonFile,
                                       llvm::StringRef SourceDir) {
  llvm::SmallString<256> Path(ReplyDir);
  llvm::sys::path::append(Path, JsonFile);
  llvm::Expected<llvm::json::Value> Value = readJson(Path);
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
  Target.Definition = backtrace(Object, SourceDir);
  return Target;
}

} // namespace

bool isCMakeBuildFolder(llvm::StringRef BuildDir) {
  return !BuildDir.empty() &&
         !cacheEntry(cacheText(BuildDir), "CMAKE_HOME_DIRECTORY").empty();
}

llvm::Expected<CMakeCodeModel> readCMakeCodeModel(llvm::StringRef BuildDir) {
  if (llvm::Error Err = writeQuery(BuildDir))
    return std::move(Err);
  if (llvm::Error Err = rerunCMake(BuildDir))
    return std::move(Err);
  llvm::SmallString<256> ReplyDir(BuildDir);
  llvm::sys::path::append(ReplyDir, ".cmake", "api", "v1", "reply");
  llvm::Expected<std::string> IndexPath = latestIndex(ReplyDir);
  if (!IndexPath)
    return IndexPath.takeError();
  llvm::Expected<llvm::json::Value> Index = readJson(*IndexPath);
  if (!Index)
    return Index.takeError();
  llvm::Expected<std::string> CodeModelFile =
      responseFile(*Index->getAsObject(), "codemodel", 2);
  if (!CodeModelFile)
    return CodeModelFile.takeError();
  llvm::SmallString<256> CodeModelPath(ReplyDir);
  llvm::sys::path::append(CodeModelPath, *CodeModelFile);
  llvm::Expected<llvm::json::Value> CodeModelValue = readJson(CodeModelPath);
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

  if (const llvm::json::Array *Directories =
          Configuration->getArray("directories"))
    for (const llvm::json::Value &Directory : *Directories) {
      const llvm::json::Object *D = Directory.getAsObject();
      CMakeDirectory Dir;
      if (D) {
        Dir.Source =
            absoluteIn(Model.SourceDir, D->getString("source").value_or("."));
        if (std::optional<int64_t> Parent = D->getInteger("parentIndex"))
          Dir.Parent = *Parent;
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
          readTarget(ReplyDir, *JsonFile, Model.SourceDir);
      if (!Target)
        return Target.takeError();
      std::optional<int64_t> Directory = T->getInteger("directoryIndex");
      if (Directory && *Directory >= 0 &&
          static_cast<size_t>(*Directory) < Model.Directories.size())
        Target->Directory = *Directory;
      Model.Targets.push_back(std::move(*Target));
    }

  // The include()d files: without them only the directories' CMakeLists.txt
  // would be searched for find_package(Torch).
  llvm::Expected<std::string> FilesFile =
      responseFile(*Index->getAsObject(), "cmakeFiles", 1);
  if (!FilesFile) {
    llvm::consumeError(FilesFile.takeError());
    return Model;
  }
  llvm::SmallString<256> FilesPath(ReplyDir);
  llvm::sys::path::append(FilesPath, *FilesFile);
  llvm::Expected<llvm::json::Value> FilesValue = readJson(FilesPath);
  if (!FilesValue) {
    llvm::consumeError(FilesValue.takeError());
    return Model;
  }
  if (const llvm::json::Array *Inputs =
          FilesValue->getAsObject()->getArray("inputs"))
    for (const llvm::json::Value &Input : *Inputs) {
      const llvm::json::Object *I = Input.getAsObject();
      if (!I || I->getBoolean("isExternal").value_or(false) ||
          I->getBoolean("isGenerated").value_or(false) ||
          I->getBoolean("isCMake").value_or(false))
        continue;
      if (std::optional<llvm::StringRef> Path = I->getString("path"))
        Model.ListFiles.push_back(absoluteIn(Model.SourceDir, *Path));
    }
  return Model;
}

} // namespace ddpify
