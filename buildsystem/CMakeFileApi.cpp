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
  llvm::StringRef IndexName = llvm::sys::path::filename(*IndexPath);
  llvm::Expected<CMakeCodeModel> Model = parseCMakeReply(
      IndexName, [&](llvm::StringRef Name) -> llvm::Expected<std::string> {
        llvm::SmallString<256> Path(ReplyDir);
        llvm::sys::path::append(Path, Name);
        return readFile(Path);
      });
  if (Model)
    Model->CacheModulePath =
        cacheEntry(cacheText(BuildDir), "CMAKE_MODULE_PATH");
  return Model;
}

} // namespace ddpify
