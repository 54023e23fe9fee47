//===- AtomicFile.cpp - outputs written whole or not at all ---------------===//
//
// llvm::sys::fs::TempFile::keep is not used: when its rename fails it falls
// back to copying over the destination, which can leave that half written,
// and each TempFile holds a descriptor open until it is kept (an --out-dir
// tree holds thousands). createUniqueFile and RemoveFileOnSignal give the
// same temporary files without either.
//
//===----------------------------------------------------------------------===//

#include "ddpify/AtomicFile.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

namespace ddpify {
namespace {

llvm::Error cannotWrite(llvm::StringRef Path, std::error_code EC) {
  return llvm::createStringError(EC, "cannot write '%s': %s",
                                 Path.str().c_str(), EC.message().c_str());
}

/// The name pattern of Destination's temporaries: hidden, in its folder (a
/// rename never crosses file systems), recognisably ddpify's.
llvm::SmallString<256> temporaryModel(llvm::StringRef Destination) {
  llvm::SmallString<256> Model(llvm::sys::path::parent_path(Destination));
  llvm::sys::path::append(Model, "." + llvm::sys::path::filename(Destination) +
                                     ".ddpify-%%%%%%.tmp");
  return Model;
}

/// Creates an empty temporary beside Destination, removed on a signal.
std::error_code createTemporary(llvm::StringRef Destination, int &FD,
                                llvm::SmallVectorImpl<char> &Temporary) {
  if (std::error_code EC = llvm::sys::fs::createUniqueFile(
          temporaryModel(Destination), FD, Temporary))
    return EC;
  llvm::sys::RemoveFileOnSignal(
      llvm::StringRef(Temporary.data(), Temporary.size()));
  return {};
}

void copyPermissions(llvm::StringRef From, llvm::StringRef To) {
  if (llvm::ErrorOr<llvm::sys::fs::perms> Perms =
          llvm::sys::fs::getPermissions(From))
    llvm::sys::fs::setPermissions(To, *Perms);
}

} // namespace

llvm::Expected<PendingFile> writePending(llvm::StringRef Destination,
                                         llvm::StringRef Content,
                                         llvm::StringRef PermissionsFrom) {
  int FD;
  llvm::SmallString<256> Temporary;
  if (std::error_code EC = createTemporary(Destination, FD, Temporary))
    return cannotWrite(Destination, EC);
  PendingFile File{Destination.str(), Temporary.str().str()};
  llvm::raw_fd_ostream Out(FD, /*shouldClose=*/true);
  Out << Content;
  Out.close();
  if (Out.has_error()) {
    std::error_code EC = Out.error();
    Out.clear_error();
    discard(File);
    return cannotWrite(Destination, EC);
  }
  copyPermissions(!PermissionsFrom.empty() &&
                          llvm::sys::fs::exists(PermissionsFrom)
                      ? PermissionsFrom
                      : Destination,
                  File.Temporary);
  return File;
}

llvm::Expected<PendingFile> copyPending(llvm::StringRef From,
                                        llvm::StringRef Destination) {
  int FD;
  llvm::SmallString<256> Temporary;
  if (std::error_code EC = createTemporary(Destination, FD, Temporary))
    return cannotWrite(Destination, EC);
  PendingFile File{Destination.str(), Temporary.str().str()};
  std::error_code EC = llvm::sys::fs::copy_file(From, FD);
  // A close can report a write that failed late (NFS, quotas).
  std::error_code CloseEC = llvm::sys::Process::SafelyCloseFileDescriptor(FD);
  if (EC || CloseEC) {
    discard(File);
    return cannotWrite(Destination, EC ? EC : CloseEC);
  }
  copyPermissions(From, File.Temporary);
  return File;
}

llvm::Expected<PendingFile> linkPending(llvm::StringRef Target,
                                        llvm::StringRef Destination) {
  // No call creates a link under a unique name: draw names until one is free.
  std::error_code EC;
  for (int Attempt = 0; Attempt < 128; ++Attempt) {
    llvm::SmallString<256> Temporary;
    llvm::sys::fs::createUniquePath(temporaryModel(Destination), Temporary,
                                    /*MakeAbsolute=*/false);
    EC = llvm::sys::fs::create_link(Target, Temporary);
    if (EC == std::errc::file_exists)
      continue;
    if (EC)
      break;
    llvm::sys::RemoveFileOnSignal(Temporary);
    return PendingFile{Destination.str(), Temporary.str().str()};
  }
  return cannotWrite(Destination, EC);
}

llvm::Error commit(const PendingFile &File) {
  std::error_code EC = llvm::sys::fs::rename(File.Temporary, File.Destination);
  if (EC) {
    discard(File);
    return cannotWrite(File.Destination, EC);
  }
  llvm::sys::DontRemoveFileOnSignal(File.Temporary);
  return llvm::Error::success();
}

void discard(const PendingFile &File) {
  llvm::sys::fs::remove(File.Temporary);
  llvm::sys::DontRemoveFileOnSignal(File.Temporary);
}

void discard(std::vector<PendingFile> &Files) {
  for (const PendingFile &File : Files)
    discard(File);
  Files.clear();
}

llvm::Error commitAll(std::vector<PendingFile> &Files) {
  for (size_t I = 0; I < Files.size(); ++I) {
    llvm::Error Err = commit(Files[I]);
    if (!Err)
      continue;
    std::error_code EC = llvm::errorToErrorCode(std::move(Err));
    std::string Message =
        "cannot replace '" + Files[I].Destination + "': " + EC.message() + "; ";
    auto List = [](llvm::ArrayRef<PendingFile> Part) {
      std::string Names;
      for (const PendingFile &File : Part)
        Names += (Names.empty() ? "" : ", ") + File.Destination;
      return Names;
    };
    llvm::ArrayRef<PendingFile> All(Files);
    Message += I == 0 ? "nothing was replaced"
                      : "already replaced: " + List(All.take_front(I));
    Message += "; left as they were: " + List(All.drop_front(I));
    for (size_t J = I + 1; J < Files.size(); ++J)
      discard(Files[J]);
    Files.clear();
    return llvm::createStringError(EC, "%s", Message.c_str());
  }
  return llvm::Error::success();
}

llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Content) {
  llvm::Expected<PendingFile> File = writePending(Path, Content);
  if (!File)
    return File.takeError();
  return commit(*File);
}

std::error_code createFolders(llvm::StringRef Folder,
                              std::vector<std::string> &Created) {
  std::vector<llvm::StringRef> Missing;
  for (llvm::StringRef Path = Folder;
       !Path.empty() && !llvm::sys::fs::exists(Path);
       Path = llvm::sys::path::parent_path(Path))
    Missing.push_back(Path);
  for (auto It = Missing.rbegin(); It != Missing.rend(); ++It) {
    std::error_code EC =
        llvm::sys::fs::create_directory(*It, /*IgnoreExisting=*/false);
    // Made meanwhile by someone else: theirs, never removed by this run.
    if (EC == std::errc::file_exists && llvm::sys::fs::is_directory(*It))
      continue;
    if (EC)
      return EC;
    Created.push_back(It->str());
  }
  return {};
}

void removeCreatedFolders(std::vector<std::string> &Created) {
  for (auto It = Created.rbegin(); It != Created.rend(); ++It)
    llvm::sys::fs::remove(*It);
  Created.clear();
}

} // namespace ddpify
