//===- ddpify.cpp - The ddpify command line -------------------------------===//
//
// ddpify migrate|diff|lint [options] <source>... [-p <build-path>]
//        [-- <compiler args>]
// ddpify migrate|diff|lint [options] -p <build-path> [--exclude <glob>]...
//
//===----------------------------------------------------------------------===//

#include "BuildConfig.h"
#include "Lint.h"
#include "Output.h"
#include "Pipeline.h"
#include "Report.h"
#include "ddpify/Registry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cstring>

using namespace llvm;
using namespace ddpify;

namespace {

cl::OptionCategory DdpifyCategory("ddpify options");

cl::list<std::string> Sources(cl::Positional, cl::desc("<source>..."),
                              cl::cat(DdpifyCategory));
cl::list<std::string>
    Excludes("exclude",
             cl::desc("Leave out the translation units matching this glob "
                      "(relative to the root, or absolute; '*' also "
                      "matches '/'; repeatable)"),
             cl::value_desc("glob"), cl::cat(DdpifyCategory));
cl::opt<std::string>
    BuildPath("p",
              cl::desc("Build directory holding compile_commands.json "
                       "(default: searched from the first source's folder "
                       "upwards)"),
              cl::value_desc("build-path"), cl::cat(DdpifyCategory));
cl::opt<std::string>
    Root("root",
         cl::desc("Project root: only files under it are rewritten, and "
                  "every source must be under it (default: the git "
                  "top-level of the first source, else its folder)"),
         cl::value_desc("dir"), cl::cat(DdpifyCategory));
cl::opt<bool> InPlace("in-place",
                      cl::desc("migrate: rewrite the changed files in place"),
                      cl::cat(DdpifyCategory));
cl::alias InPlaceShort("i", cl::desc("Alias for --in-place"),
                       cl::aliasopt(InPlace), cl::cat(DdpifyCategory));
cl::opt<std::string>
    OutDir("out-dir",
           cl::desc("migrate: write a copy of the files under the root into "
                    "<dir>, changed ones rewritten (skips .git and build "
                    "trees)"),
           cl::value_desc("dir"), cl::cat(DdpifyCategory));
cl::list<std::string>
    ExtraArgs("extra-arg",
              cl::desc("Additional argument to append to the compiler "
                       "command line"),
              cl::cat(DdpifyCategory));
cl::list<std::string>
    ExtraArgsBefore("extra-arg-before",
                    cl::desc("Additional argument to prepend to the compiler "
                             "command line"),
                    cl::cat(DdpifyCategory));
cl::opt<std::string>
    Checks("checks",
           cl::desc("lint: comma-separated globs of checks to run, '-' "
                    "removes (e.g. '-*,ddp-cuda-call'; default: all)"),
           cl::init("*"), cl::cat(DdpifyCategory));
cl::opt<LintFormat> Format(
    "format",
    cl::desc("lint: output format; diff: text (a unified diff, default) or "
             "rdjson"),
    cl::values(clEnumValN(LintFormat::Text, "text",
                          "clang-style diagnostics (default); diff: a "
                          "unified diff"),
               clEnumValN(LintFormat::Json, "json", "one JSON document"),
               clEnumValN(LintFormat::Sarif, "sarif", "SARIF 2.1.0"),
               clEnumValN(LintFormat::Rdjson, "rdjson",
                          "reviewdog's diagnostic format, each edit a "
                          "suggestion on the lines it replaces (lint, diff)")),
    cl::init(LintFormat::Text), cl::cat(DdpifyCategory));
cl::opt<std::string> WarningsAsErrors(
    "warnings-as-errors",
    cl::desc("lint: checks (globs, as --checks) whose findings are errors; "
             "they make the exit status 1 even with --exit-zero"),
    cl::value_desc("globs"), cl::cat(DdpifyCategory));
cl::opt<std::string>
    ExportFixes("export-fixes",
                cl::desc("lint: write the fix-its as clang-tidy YAML for "
                         "clang-apply-replacements"),
                cl::value_desc("file"), cl::cat(DdpifyCategory));
cl::opt<bool> Fix("fix",
                  cl::desc("lint: apply the fix-its of the reported findings "
                           "in place (the edits migrate makes)"),
                  cl::cat(DdpifyCategory));
cl::opt<bool> ShowMigration(
    "show-migration",
    cl::desc("lint: list the findings 'ddpify migrate' simply rewrites (stdout "
             "guards, SyncBatchNorm, and in a program not yet distributed "
             ".cuda(), CUDA devices, loaders and saves) one by one, instead of "
             "one summary line per file"),
    cl::cat(DdpifyCategory));
cl::opt<bool> ExitZero("exit-zero",
                       cl::desc("lint: exit 0 even when warnings are "
                                "reported"),
                       cl::cat(DdpifyCategory));
cl::opt<unsigned>
    Jobs("j",
         cl::desc("Translation units parsed in parallel (default: one per "
                  "core); edits are merged per file as with -j 1"),
         cl::init(0), cl::cat(DdpifyCategory));

cl::opt<std::string>
    CacheDir("cache-dir",
             cl::desc("Folder of the precompiled-header cache (default: "
                      "$DDPIFY_CACHE_DIR, else $XDG_CACHE_HOME/ddpify, else "
                      "~/.cache/ddpify; never in the project tree)"),
             cl::value_desc("dir"), cl::cat(DdpifyCategory));
cl::opt<bool> NoCache("no-cache",
                      cl::desc("Parse every file from scratch (no "
                               "precompiled-header cache)"),
                      cl::cat(DdpifyCategory));
cl::opt<bool> CacheTrace("cache-trace",
                         cl::desc("Print whether each precompiled header "
                                  "was reused or built"),
                         cl::cat(DdpifyCategory), cl::Hidden);

cl::opt<std::string> FormatStyle(
    "format-style",
    cl::desc("Format the lines ddpify changes (migrate, diff, lint --fix) "
             "with clang-format: overflow (default: only the statements an "
             "edit pushes past the column limit or out of alignment), none, "
             "file (the nearest .clang-format; none without one), llvm, "
             "google, ... or \"{key: value, ...}\""),
    cl::init(OverflowFormatStyle), cl::value_desc("style"),
    cl::cat(DdpifyCategory));

cl::opt<bool> ShardOptimizer(
    "shard-optimizer",
    cl::desc("migrate, diff: build the optimizers of wrapped models as "
             "ddp::ZeroRedundancyOptimizer (ZeRO stage 1: each rank holds "
             "the optimizer state of its share of the parameters; R14)"),
    cl::cat(DdpifyCategory));

cl::opt<bool> RolloutsPerRank(
    "rollouts-per-rank",
    cl::desc("migrate, diff: each rank collects its own rollouts in a "
             "training loop that draws its own experience (reinforcement "
             "learning): ddp::reseed_per_rank() before it; the samples per "
             "update are multiplied by the number of processes (R16)"),
    cl::cat(DdpifyCategory));

cl::opt<bool> Quiet("quiet",
                    cl::desc("No progress or statistics on stderr (errors "
                             "and not-rewritten items are still shown)"),
                    cl::cat(DdpifyCategory));

cl::opt<std::string>
    ReportFile("report",
               cl::desc("migrate, diff: also write the report (rule counts "
                        "per file, items to migrate by hand) as JSON"),
               cl::value_desc("file"), cl::cat(DdpifyCategory));

const char Overview[] =
    "ddpify: turn a single-GPU LibTorch program into a multi-process DDP "
    "program.\n\n"
    "  ddpify migrate|diff|lint [options] <source>... [-p <build-path>] "
    "[-- <compiler args>]\n"
    "  ddpify migrate|diff|lint [options] -p <build-path> [--exclude <glob>]"
    "...\n"
    "           (no sources: every translation unit of the compilation "
    "database\n"
    "           under --root)\n\n"
    "modes:\n"
    "  migrate  rewrite the sources (and the headers under --root they "
    "include);\n"
    "           needs --in-place or --out-dir\n"
    "  diff     print the edits as a unified diff for git apply / patch -p1\n"
    "  lint     print clang-style warnings with fix-its\n";

std::string rulesHelp() {
  std::string Text = "\nRules (lint check in brackets):\n";
  for (const RuleInfo &Rule : allRules()) {
    Text +=
        "  " + (Rule.RuleId.empty() ? std::string("lint") : Rule.RuleId.str());
    if (!Rule.CheckName.empty())
      Text += " [" + Rule.CheckName.str() + "]";
    Text += ": " + Rule.Summary.str() + "\n";
  }
  return Text;
}

cl::extrahelp CompilationHelp(
    "\n--color=auto|always|never: lint's text output in colour (default auto: "
    "only on a\nterminal).\n"
    "\nThe compilation database comes from -p, from compile_commands.json in "
    "a parent folder\nof the first source, or from the compiler arguments "
    "after `--` (e.g. `-- -std=c++17\n-I/usr/include/torch/csrc/api/include`)."
    " LibTorch 1.13's headers do not parse\nwith Clang at -std=c++20: use "
    "--extra-arg=-std=c++17.\n\n"
    "Exit codes: 0 nothing found / written; 1 (diff, lint) changes pending or "
    "warnings;\n2 error (bad option, no compilation database, parse error, "
    "source outside the root,\nunwritable output, conflicting edits); "
    "nothing is written on error.\n");

/// <bin>/../lib/clang/<major> when the binary sits in an LLVM-like install,
/// else the resource directory of the LLVM it was built against.
std::string findResourceDir(const char *Argv0) {
  static int Anchor;
  std::string Exe = sys::fs::getMainExecutable(Argv0, &Anchor);
  SmallString<256> Candidate(
      sys::path::parent_path(sys::path::parent_path(Exe)));
  sys::path::append(Candidate, "lib", "clang", build::ClangMajor);
  SmallString<256> Probe(Candidate);
  sys::path::append(Probe, "include", "stddef.h");
  if (sys::fs::exists(Probe))
    return Candidate.str().str();
  return build::ClangResourceDir;
}

/// The folder holding the runtime's <ddp/ddp.h>: <bin>/../include when the
/// binary is installed with the runtime, else the runtime/include of the
/// source tree ddpify was built from; empty when neither has it.
std::string findRuntimeIncludeDir(const char *Argv0) {
  static int Anchor;
  std::string Exe = sys::fs::getMainExecutable(Argv0, &Anchor);
  SmallString<256> Installed(
      sys::path::parent_path(sys::path::parent_path(Exe)));
  sys::path::append(Installed, "include");
  for (StringRef Candidate :
       {StringRef(Installed), StringRef(build::RuntimeIncludeDir)}) {
    SmallString<256> Probe(Candidate);
    sys::path::append(Probe, "ddp", "ddp.h");
    if (sys::fs::exists(Probe))
      return Candidate.str();
  }
  return "";
}

/// The mode, which comes first like `git <command>`; --help and --version
/// pass through. First: the index of the first option after it.
int readMode(int argc, const char **argv, ToolOptions &Options, int &First) {
  First = 1;
  if (argc > 1 && argv[1][0] != '-') {
    StringRef Name = argv[1];
    if (Name == "migrate")
      Options.RunMode = Mode::Migrate;
    else if (Name == "diff")
      Options.RunMode = Mode::Diff;
    else if (Name == "lint")
      Options.RunMode = Mode::Lint;
    else if (Name.contains('/') || Name.contains('.')) {
      errs() << "ddpify: error: no mode given before '" << Name
             << "'; usage: ddpify migrate|diff|lint [options] <source>... "
                "(see --help)\n";
      return ExitError;
    } else {
      errs() << "ddpify: error: unknown mode '" << Name
             << "'; expected migrate, diff or lint (see --help)\n";
      return ExitError;
    }
    First = 2;
    return ExitOk;
  }
  if (argc < 2 ||
      (std::strcmp(argv[1], "--help") != 0 &&
       std::strcmp(argv[1], "-help") != 0 && std::strcmp(argv[1], "-h") != 0 &&
       std::strcmp(argv[1], "--version") != 0)) {
    errs() << "ddpify: error: no mode given; usage: ddpify migrate|diff|lint "
              "[options] <source>... (see --help)\n";
    return ExitError;
  }
  return ExitOk;
}

/// The arguments from First on that LLVM's option parser does not take, read
/// here: compiler arguments after `--` (a fixed compilation database), and
/// --color=auto|always|never (LLVM registers its own `--color`). Args gets
/// the others.
int readOwnArguments(int argc, const char **argv, int First,
                     ToolOptions &Options, LintOptions &LintOpts,
                     bool &ColorGiven, std::vector<const char *> &Args) {
  for (int I = First; I < argc; ++I) {
    if (std::strcmp(argv[I], "--") == 0) {
      Options.HasFixedArgs = true;
      for (int J = I + 1; J < argc; ++J)
        Options.FixedArgs.push_back(argv[J]);
      break;
    }
    StringRef Arg = argv[I];
    if (Arg.consume_front("--color") || Arg.consume_front("-color")) {
      if (Arg.empty() || Arg == "=always")
        LintOpts.Color = ColorMode::Always;
      else if (Arg == "=never")
        LintOpts.Color = ColorMode::Never;
      else if (Arg == "=auto")
        LintOpts.Color = ColorMode::Auto;
      else {
        errs() << "ddpify: error: bad option '" << argv[I]
               << "'; expected --color=auto, always or never\n";
        return ExitError;
      }
      ColorGiven = true;
      continue;
    }
    Args.push_back(argv[I]);
  }
  return ExitOk;
}

/// The parsed command-line options into Options and LintOpts.
void takeOptions(const char *Argv0, ToolOptions &Options,
                 LintOptions &LintOpts) {
  Options.Sources.assign(Sources.begin(), Sources.end());
  Options.Root = Root;
  Options.BuildPath = BuildPath;
  Options.InPlace = InPlace;
  Options.OutDir = OutDir;
  Options.ExtraArgs.assign(ExtraArgs.begin(), ExtraArgs.end());
  Options.ExtraArgsBefore.assign(ExtraArgsBefore.begin(),
                                 ExtraArgsBefore.end());
  Options.Quiet = Quiet;
  Options.Jobs = Jobs;
  Options.CacheDir = CacheDir;
  Options.NoCache = NoCache;
  Options.CacheTrace = CacheTrace;
  Options.Checks = Checks;
  Options.ResourceDir = findResourceDir(Argv0);
  Options.RuntimeIncludeDir = findRuntimeIncludeDir(Argv0);
  Options.ReportPath = ReportFile;
  Options.FormatStyle = FormatStyle;
  if (ShardOptimizer)
    Options.OptInRules.push_back("R14");
  if (RolloutsPerRank)
    Options.OptInRules.push_back("R16");
  LintOpts.Format = Format;
  Options.DiffRdjson = Format == LintFormat::Rdjson;
  LintOpts.WarningsAsErrors = WarningsAsErrors;
  LintOpts.ExportFixes = ExportFixes;
  LintOpts.Fix = Fix;
  LintOpts.ExitZero = ExitZero;
  LintOpts.ShowMigration = ShowMigration;
}

/// The options that do not fit together or cannot be read, each an error
/// before anything is parsed; the --exclude globs compiled.
int checkOptions(ToolOptions &Options, bool ColorGiven) {
  // No sources: the whole codebase, every unit of the database under the
  // root (as run-clang-tidy does). `--` lists no files.
  if (Options.Sources.empty() &&
      (Options.BuildPath.empty() || Options.HasFixedArgs)) {
    errs() << "ddpify: error: no source files given; list them, or give "
              "-p <build-path> alone for every translation unit of its "
              "compilation database\n";
    return ExitError;
  }
  for (const std::string &Glob : Excludes) {
    Expected<GlobPattern> Pattern = GlobPattern::create(Glob);
    if (!Pattern) {
      errs() << "ddpify: error: --exclude '" << Glob
             << "': " << toString(Pattern.takeError()) << "\n";
      return ExitError;
    }
    Options.Excludes.push_back(std::move(*Pattern));
  }
  if (Options.RunMode == Mode::Migrate) {
    if (Options.InPlace == !Options.OutDir.empty()) {
      errs() << "ddpify: error: migrate needs exactly one of --in-place and "
                "--out-dir\n";
      return ExitError;
    }
  } else if (Options.InPlace || !Options.OutDir.empty()) {
    errs() << "ddpify: error: --in-place and --out-dir only apply to "
              "migrate\n";
    return ExitError;
  }
  if (Options.RunMode == Mode::Diff && Format != LintFormat::Text &&
      Format != LintFormat::Rdjson) {
    errs() << "ddpify: error: diff prints a unified diff (--format=text) or "
              "reviewdog's rdjson (--format=rdjson); json and sarif only "
              "apply to lint\n";
    return ExitError;
  }
  if (Options.RunMode != Mode::Lint &&
      ((Format.getNumOccurrences() && Options.RunMode != Mode::Diff) ||
       WarningsAsErrors.getNumOccurrences() ||
       ExportFixes.getNumOccurrences() || Fix || ExitZero || ShowMigration ||
       ColorGiven)) {
    errs() << "ddpify: error: --color, --warnings-as-errors, "
              "--export-fixes, --fix and --exit-zero only apply to lint, "
              "--format to lint and diff\n";
    return ExitError;
  }
  if (Options.RunMode == Mode::Lint && ReportFile.getNumOccurrences()) {
    errs() << "ddpify: error: --report only applies to migrate and diff\n";
    return ExitError;
  }
  if (Options.RunMode == Mode::Lint && ShardOptimizer) {
    errs() << "ddpify: error: --shard-optimizer only applies to migrate and "
              "diff\n";
    return ExitError;
  }
  if (Options.RunMode == Mode::Lint && RolloutsPerRank) {
    errs() << "ddpify: error: --rollouts-per-rank only applies to migrate "
              "and diff\n";
    return ExitError;
  }
  // Without sources, a `.clang-format` is looked for from the root (or the
  // current folder) up.
  SmallString<256> StyleFile(Options.Root.empty() ? "." : Options.Root);
  sys::path::append(StyleFile, "ddpify.cpp");
  if (llvm::Error Err = checkFormatStyle(
          Options.FormatStyle, Options.Sources.empty()
                                   ? StringRef(StyleFile)
                                   : StringRef(Options.Sources.front()))) {
    errs() << "ddpify: error: --format-style: " << toString(std::move(Err))
           << "\n";
    return ExitError;
  }
  return ExitOk;
}

} // namespace

int main(int argc, const char **argv) {
  InitLLVM Init(argc, argv);
  cl::HideUnrelatedOptions(DdpifyCategory);
  cl::SetVersionPrinter([](raw_ostream &OS) {
    OS << "ddpify " << build::Version << " (LLVM " << build::ClangMajor
       << ")\n";
  });
  static std::string Help = rulesHelp();
  static cl::extrahelp RulesHelp(Help.c_str());

  // Relative paths, the compilation database and Clang's own driver all need
  // the current folder; one deleted under a shell made Clang abort.
  SmallString<256> Here;
  if (std::error_code EC = sys::fs::current_path(Here)) {
    errs() << "ddpify: error: cannot read the current folder (" << EC.message()
           << "): was it deleted? Run ddpify from an existing folder\n";
    return ExitError;
  }

  ToolOptions Options;
  LintOptions LintOpts;
  int First = 1;
  if (int Status = readMode(argc, argv, Options, First))
    return Status;
  std::vector<const char *> Args{argv[0]};
  bool ColorGiven = false;
  if (int Status = readOwnArguments(argc, argv, First, Options, LintOpts,
                                    ColorGiven, Args))
    return Status;
  std::string ParseErrors;
  raw_string_ostream ErrorStream(ParseErrors);
  if (!cl::ParseCommandLineOptions(Args.size(), Args.data(), Overview,
                                   &ErrorStream)) {
    ErrorStream.flush();
    errs() << ParseErrors;
    return ExitError;
  }
  takeOptions(argv[0], Options, LintOpts);
  if (int Status = checkOptions(Options, ColorGiven))
    return Status;

  PipelineResult Result;
  if (int Status = runPipeline(Options, Result))
    return Status;
  switch (Options.RunMode) {
  case Mode::Migrate:
    return migrateAndReport(Options, Result);
  case Mode::Diff:
    return diffAndReport(Options, Result, outs());
  case Mode::Lint:
    return runLint(Options, LintOpts, Result, outs());
  }
  return ExitError;
}
