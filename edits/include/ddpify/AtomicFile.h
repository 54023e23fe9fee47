//===- AtomicFile.h - outputs written whole or not at all -------*- C++ -*-===//
//
// Every file ddpify writes (migrated sources, --out-dir trees, reports,
// exported fixes, the header cache, CMake's file API query) is first written
// whole under a temporary name in its destination's folder, then renamed
// over the destination: a reader sees the old file or the new one, never
// half of one, and an error (a full disk) leaves the old file as it was.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_ATOMICFILE_H
#define DDPIFY_ATOMICFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace ddpify {

/// A file written under a temporary name beside its destination, waiting to
/// be renamed over it (commit) or removed (discard). The temporary is removed
/// if the process is interrupted by a signal before either.
struct PendingFile {
  std::string Destination;
  std::string Temporary;
};

/// Writes Content to a new temporary beside Destination. The temporary gets
/// the permissions of PermissionsFrom when given and existing, else those of
/// Destination when it exists (an executable script stays one). The error
/// names Destination.
llvm::Expected<PendingFile> writePending(llvm::StringRef Destination,
                                         llvm::StringRef Content,
                                         llvm::StringRef PermissionsFrom = "");

/// Copies the regular file From to a new temporary beside Destination, with
/// From's permissions.
llvm::Expected<PendingFile> copyPending(llvm::StringRef From,
                                        llvm::StringRef Destination);

/// Creates a symbolic link to Target under a temporary name beside
/// Destination.
llvm::Expected<PendingFile> linkPending(llvm::StringRef Target,
                                        llvm::StringRef Destination);

/// Renames the temporary over the destination; on failure the temporary is
/// removed and the destination is as it was.
llvm::Error commit(const PendingFile &File);

/// Removes the temporary.
void discard(const PendingFile &File);
void discard(std::vector<PendingFile> &Files);

/// Commits Files in order. When a rename fails, the temporaries not yet
/// renamed are removed and the error names the file that failed, the files
/// already replaced and those left as they were.
llvm::Error commitAll(std::vector<PendingFile> &Files);

/// writePending, then commit.
llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Content);

/// Creates Folder and its missing parents, appending each folder it created
/// (outermost first) to Created, so that removeCreatedFolders can undo it.
std::error_code createFolders(llvm::StringRef Folder,
                              std::vector<std::string> &Created);

/// Removes the folders createFolders made, innermost first. A folder that is
/// not empty stays: only what this run made is ever removed.
void removeCreatedFolders(std::vector<std::string> &Created);

} // namespace ddpify

#endif // DDPIFY_ATOMICFILE_H
