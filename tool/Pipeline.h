//===- Pipeline.h - compilation database -> Findings -> edits ---*- C++ -*-===//

#ifndef DDPIFY_PIPELINE_H
#define DDPIFY_PIPELINE_H

#include "ddpify/EditSet.h"
#include "ddpify/Finding.h"
#include "llvm/Support/GlobPattern.h"
#include <string>
#include <vector>

namespace ddpify {

enum class Mode { Migrate, Diff, Lint };

/// Exit codes shared by every mode.
/// ExitUnsafe: migrate or diff listed an error-level report item, a spot
/// that leaves the migrated program wrong (docs/report.md).
enum ExitCode { ExitOk = 0, ExitFindings = 1, ExitError = 2, ExitUnsafe = 3 };

struct ToolOptions {
  Mode RunMode = Mode::Migrate;
  /// The translation units given; none: every one of the compilation
  /// database (-p) under the root.
  std::vector<std::string> Sources;
  /// --exclude: globs of translation units left out (relative to the root,
  /// or absolute).
  std::vector<llvm::GlobPattern> Excludes;
  std::string Root;
  std::string BuildPath;
  bool InPlace = false;
  std::string OutDir;
  std::vector<std::string> ExtraArgs;
  std::vector<std::string> ExtraArgsBefore;
  bool Quiet = false;
  /// Translation units parsed at once; 0: one per core.
  unsigned Jobs = 0;
  /// The header cache (HeaderCache.h): its folder (empty: the default) or
  /// none at all; CacheTrace prints what it did.
  std::string CacheDir;
  bool NoCache = false;
  bool CacheTrace = false;
  std::string Checks;
  /// Compiler arguments after `--`, when given.
  bool HasFixedArgs = false;
  std::vector<std::string> FixedArgs;
  /// Clang's builtin headers for this binary.
  std::string ResourceDir;
  /// The folder holding <ddp/ddp.h> (the runtime's headers), added with
  /// -idirafter to every parse; empty when not found.
  std::string RuntimeIncludeDir;
  /// migrate/diff: --report, where the report is written as JSON.
  std::string ReportPath;
  /// --format-style: how the lines that edits touch are formatted
  /// (EditSet::setFormatStyle).
  std::string FormatStyle = OverflowFormatStyle;
  /// The opt-in rules the run applies (e.g. "R14" for --shard-optimizer).
  std::vector<std::string> OptInRules;
  /// diff: --format=rdjson, reviewdog's format (Rdjson.h), instead of a
  /// unified diff.
  bool DiffRdjson = false;
};

struct PipelineResult {
  std::string Root; ///< Absolute, real path of the project root.
  /// The compilation database's folder (-p, or where compile_commands.json
  /// was found), absolute and real; empty with `--` and no -p. R10 reads
  /// CMake's targets there.
  std::string BuildDir;
  /// The translation units parsed (absolute, real paths), in order.
  std::vector<std::string> Units;
  FindingList Findings;
  EditSet Edits;
  /// Lines the report prints after its items (e.g. R10 found no
  /// CMakeLists.txt).
  std::vector<std::string> Notes;
};

/// Parses every source, collects Findings and turns them into edits (plus R9
/// includes unless in lint mode). Returns ExitOk, or ExitError after
/// printing why.
int runPipeline(const ToolOptions &Options, PipelineResult &Result);

} // namespace ddpify

#endif // DDPIFY_PIPELINE_H
