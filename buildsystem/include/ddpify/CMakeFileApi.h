//===- CMakeFileApi.h - targets from CMake's File API -----------*- C++ -*-===//
//
// R10 learns which target compiles each source, and where that target is
// defined, from CMake itself: a `codemodel-v2` (and `cmakeFiles-v1`) query in
// the build folder, `cmake <build>` re-run there, the reply read back
// (cmake-file-api(7)). So file(GLOB), aux_source_directory, include()d files,
// macros and functions, subdirectories and generated sources are all seen as
// CMake sees them.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_CMAKEFILEAPI_H
#define DDPIFY_CMAKEFILEAPI_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>
#include <vector>

namespace ddpify {

/// One frame of a target's definition backtrace.
struct CMakeFrame {
  std::string File; ///< Absolute.
  unsigned Line = 0;
  std::string Command; ///< Lower-case; empty for a file's own frame.
};

struct CMakeTarget {
  std::string Name;
  /// EXECUTABLE, STATIC_LIBRARY, SHARED_LIBRARY, MODULE_LIBRARY,
  /// OBJECT_LIBRARY, INTERFACE_LIBRARY or UTILITY.
  std::string Type;
  std::vector<std::string> Sources; ///< Absolute, as CMake names them.
  /// The add_executable/add_library call first, then each caller up to the
  /// file frame that holds the outermost call.
  std::vector<CMakeFrame> Definition;
  size_t Directory = 0; ///< Into CMakeCodeModel::Directories.
  /// The target_link_libraries calls CMake ran for this target (a backtrace
  /// of its link or compile flags names them): in a branching CMake file,
  /// the branch the configured build takes. Not every call need show (one
  /// that adds no flag has no backtrace).
  std::vector<CMakeFrame> LinkCalls;
  /// Each find_package call that read LibTorch's TorchConfig.cmake (the
  /// parent of that file's frame in the target's backtraces), with its
  /// callers up to the file frame of a directory's CMakeLists.txt: where the
  /// project finds Torch, however it got there (an include()d module, a
  /// module including another, a function).
  std::vector<std::vector<CMakeFrame>> TorchFinds;

  bool isLibrary() const { return llvm::StringRef(Type).ends_with("LIBRARY"); }
};

struct CMakeDirectory {
  std::string Source; ///< Absolute.
  std::optional<size_t> Parent;
};

struct CMakeCodeModel {
  std::string SourceDir, BuildDir;
  std::vector<CMakeDirectory> Directories;
  std::vector<CMakeTarget> Targets;
  /// The project's own CMake files CMake read (CMakeLists.txt and include()d
  /// ones), absolute; neither CMake's modules nor generated files.
  std::vector<std::string> ListFiles;
  /// The other files CMake read outside the source and build folders
  /// (cmake-file-api(7)'s isExternal: a module of the project above its
  /// source folder, a package's config files), absolute; not CMake's own.
  std::vector<std::string> ExternalListFiles;
  /// CMAKE_MODULE_PATH as the build folder's cache holds it (given with
  /// -DCMAKE_MODULE_PATH), a list; empty when it has none.
  std::string CacheModulePath;
};

/// Whether \p BuildDir is a CMake build folder: a CMakeCache.txt naming its
/// source folder.
bool isCMakeBuildFolder(llvm::StringRef BuildDir);

/// Writes ddpify's query into \p BuildDir, re-runs the cmake that configured
/// it there and reads the reply. An error says why in a few words (no cmake,
/// a failed re-run with its last line of output, a CMake without the File
/// API, a reply that is not what cmake-file-api(7) describes).
llvm::Expected<CMakeCodeModel> readCMakeCodeModel(llvm::StringRef BuildDir);

/// Reads the file \p Name of a File API reply folder (as the reply's index
/// and code model name them: `codemodel-v2-<hash>.json`).
using CMakeReplyReader =
    llvm::function_ref<llvm::Expected<std::string>(llvm::StringRef Name)>;

/// The code model of the File API reply whose index is \p IndexName, each
/// file read through \p ReadReplyFile: readCMakeCodeModel's reading of the
/// reply, apart from the folder it lies in. An error names the reply file and
/// what in it is not what cmake-file-api(7) describes.
llvm::Expected<CMakeCodeModel> parseCMakeReply(llvm::StringRef IndexName,
                                               CMakeReplyReader ReadReplyFile);

} // namespace ddpify

#endif // DDPIFY_CMAKEFILEAPI_H
