//===- BuildConfig.h - Values the build knows -------------------*- C++ -*-===//
//
// Paths and names CMake knows when it configures the build. They live in one
// generated unit (BuildConfig.cpp.in) and not in -D options of the units
// that use them: an absolute path of the checkout in a compile command makes
// ccache compile that unit again in every other checkout (CCACHE_BASEDIR
// rewrites include folders, not macro values).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_TOOL_BUILDCONFIG_H
#define DDPIFY_TOOL_BUILDCONFIG_H

namespace ddpify::build {
/// Clang's builtin headers of the LLVM ddpify was built against.
extern const char *const ClangResourceDir;
/// That LLVM's major version.
extern const char *const ClangMajor;
/// The runtime's headers (<ddp/ddp.h>) in the source tree.
extern const char *const RuntimeIncludeDir;
extern const char *const Version;
/// Where SARIF's helpUri and informationUri point (docs/checks.md).
extern const char *const DocsUrl;
} // namespace ddpify::build

#endif
