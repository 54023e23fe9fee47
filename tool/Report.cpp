//===- Report.cpp - R10, report comments and the migration report ---------===//

#include "Report.h"
#include "Output.h"
#include "Rdjson.h"
#include "ddpify/AtomicFile.h"
#include "ddpify/CMakeRewriter.h"
#include "ddpify/ReportItems.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <map>
#include <optional>

namespace ddpify {
namespace {

std::string pathInRoot(llvm::StringRef Path, llvm::StringRef Root) {
  llvm::StringRef Rest = Path;
  if (Rest.consume_front(Root))
    Rest = Rest.ltrim('/');
  return Rest.str();
}

/// R1 < R2 < ... < R9 < R10 < R11.
struct RuleOrder {
  bool operator()(const std::string &A, const std::string &B) const {
    if (A.size() != B.size())
      return A.size() < B.size();
    return A < B;
  }
};

using RuleCounts = std::map<std::string, unsigned, RuleOrder>;

struct FileSummary {
  RuleCounts Rules;
  unsigned Comments = 0;
};

/// What the report says, computed once for the text and the JSON.
struct Summary {
  std::map<std::string, FileSummary> Files; ///< Changed files, absolute.
  RuleCounts Totals;
  std::vector<const Finding *> Items;
};

Summary summarise(const PipelineResult &Result) {
  Summary S;
  for (const auto &[File, Edits] : Result.Edits.files()) {
    if (Edits.empty())
      continue;
    FileSummary &FS = S.Files[File];
    for (const clang::tooling::Replacement &Edit : Edits) {
      llvm::StringRef Text = Edit.getReplacementText();
      // R9's insertion (EditSet::addRuntimeIncludes).
      if (Edit.getLength() == 0 && Text.contains("#include <ddp/ddp.h>"))
        ++FS.Rules["R9"];
      FS.Comments += Text.count("// ddpify: ");
    }
  }
  for (const Finding &F : Result.Findings) {
    if (isReportItem(F)) {
      S.Items.push_back(&F);
      continue;
    }
    auto File = S.Files.find(F.FilePath);
    if (!F.RuleId.empty() && File != S.Files.end())
      ++File->second.Rules[F.RuleId];
  }
  for (const auto &[File, FS] : S.Files)
    for (const auto &[Rule, Count] : FS.Rules)
      S.Totals[Rule] += Count;
  std::stable_sort(S.Items.begin(), S.Items.end(),
                   [](const Finding *A, const Finding *B) {
                     return std::tie(A->FilePath, A->Line, A->Column) <
                            std::tie(B->FilePath, B->Line, B->Column);
                   });
  return S;
}

void printCounts(llvm::raw_ostream &OS, const RuleCounts &Counts,
                 bool Leading) {
  for (const auto &[Rule, Count] : Counts) {
    OS << (Leading ? ", " : "") << Rule << ": " << Count;
    Leading = true;
  }
}

llvm::json::Object countsJson(const RuleCounts &Counts) {
  llvm::json::Object Object;
  for (const auto &[Rule, Count] : Counts)
    Object[Rule] = Count;
  return Object;
}

/// Writes Content to a temporary beside Path; the error names --report.
llvm::Expected<PendingFile> prepareReport(llvm::StringRef Path,
                                          llvm::StringRef Content) {
  if (llvm::sys::fs::is_directory(Path))
    return llvm::createStringError(
        std::make_error_code(std::errc::is_a_directory),
        "cannot write the report '%s': it is a directory", Path.str().c_str());
  llvm::Expected<PendingFile> Pending = writePending(Path, Content);
  if (!Pending) {
    std::error_code EC = llvm::errorToErrorCode(Pending.takeError());
    return llvm::createStringError(EC, "cannot write the report '%s': %s",
                                   Path.str().c_str(), EC.message().c_str());
  }
  return Pending;
}

int commitReport(const PendingFile &Report) {
  if (llvm::Error Err = commit(Report)) {
    std::error_code EC = llvm::errorToErrorCode(std::move(Err));
    llvm::errs() << "ddpify: error: cannot write the report '"
                 << Report.Destination << "': " << EC.message() << "\n";
    return ExitError;
  }
  return ExitOk;
}

/// Runs Body between writing the report's temporary and renaming it into
/// place; a report that cannot be written stops everything first.
template <typename BodyT>
int withReport(const ToolOptions &Options, const PipelineResult &Result,
               BodyT Body) {
  std::optional<PendingFile> Report;
  if (!Options.ReportPath.empty()) {
    llvm::Expected<PendingFile> Prepared = prepareReport(
        Options.ReportPath, reportJson(Options, Result, /*Applied=*/true));
    if (!Prepared) {
      llvm::errs() << "ddpify: error: " << llvm::toString(Prepared.takeError())
                   << "; nothing written\n";
      return ExitError;
    }
    Report = std::move(*Prepared);
  }
  int Status = Body();
  if (!Report)
    return Status;
  if (Status == ExitError) {
    discard(*Report);
    return Status;
  }
  if (int Error = commitReport(*Report))
    return Error;
  return Status;
}

/// Exit 3 in place of 0 or 1 when an item leaves the program wrong.
int withUnsafe(int Status, const PipelineResult &Result) {
  if (Status == ExitError)
    return Status;
  for (const Finding &F : Result.Findings)
    if (F.Level == ReportLevel::Error && isReportItem(F))
      return ExitUnsafe;
  return Status;
}

} // namespace

int addBuildAndReportEdits(const ToolOptions &Options, PipelineResult &Result) {
  std::vector<std::string> Changed;
  for (const auto &[File, Edits] : Result.Edits.files())
    if (!Edits.empty())
      Changed.push_back(File);
  CMakeMigration Build = migrateCMake(Changed, Result.Root, Result.BuildDir);
  for (const clang::tooling::Replacement &Edit : Build.Edits)
    if (llvm::Error Err = Result.Edits.add(Edit)) {
      llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err))
                   << "\n";
      return ExitError;
    }
  Result.Findings.insert(Result.Findings.end(), Build.Findings.begin(),
                         Build.Findings.end());
  Result.Notes.insert(Result.Notes.end(), Build.Notes.begin(),
                      Build.Notes.end());

  // A comment whose line another edit rewrites is left out: the item is
  // still listed.
  for (const clang::tooling::Replacement &Comment :
       reportComments(Result.Findings))
    if (llvm::Error Err = Result.Edits.add(Comment, "report"))
      llvm::consumeError(std::move(Err));
  return ExitOk;
}

void printReport(const ToolOptions &Options, const PipelineResult &Result,
                 bool Applied, llvm::raw_ostream &OS) {
  Summary S = summarise(Result);
  if (!Options.Quiet && Applied) {
    OS << "ddpify: " << S.Files.size() << " file(s) changed";
    printCounts(OS, S.Totals, /*Leading=*/true);
    OS << "\n";
    for (const auto &[File, FS] : S.Files) {
      OS << "  " << pathInRoot(File, Result.Root) << ": ";
      printCounts(OS, FS.Rules, /*Leading=*/false);
      if (FS.Comments)
        OS << (FS.Rules.empty() ? "" : ", ")
           << "report comments: " << FS.Comments;
      OS << "\n";
    }
  }
  if (!S.Items.empty()) {
    OS << "ddpify: " << S.Items.size()
       << " item(s) to migrate by hand (ids: docs/report.md):\n";
    for (const Finding *F : S.Items) {
      OS << "  " << (F->Level == ReportLevel::Error ? "error: " : "")
         << reportItemId(*F) << " " << pathInRoot(F->FilePath, Result.Root)
         << ":" << F->Line << ": ";
      // The rule (and its check), or the check of a lint-only finding.
      if (!F->RuleId.empty())
        OS << F->RuleId
           << (F->CheckName.empty() ? "" : " [" + F->CheckName + "]") << ": ";
      else if (!F->CheckName.empty())
        OS << F->CheckName << ": ";
      OS << reportItemReason(*F) << "\n";
    }
  }
  if (!Options.Quiet)
    for (const std::string &Note : Result.Notes)
      OS << "ddpify: note: " << Note << "\n";
}

std::string reportJson(const ToolOptions &Options, const PipelineResult &Result,
                       bool Applied) {
  Summary S = summarise(Result);
  llvm::json::Array Files;
  for (const auto &[File, FS] : S.Files)
    Files.push_back(llvm::json::Object{{"path", pathInRoot(File, Result.Root)},
                                       {"rules", countsJson(FS.Rules)},
                                       {"reportComments", FS.Comments}});
  llvm::json::Array Items;
  for (const Finding *F : S.Items)
    Items.push_back(llvm::json::Object{
        {"id", reportItemId(*F)},
        {"level", F->Level == ReportLevel::Error ? "error" : "warning"},
        {"rule", F->RuleId},
        {"check", F->CheckName},
        {"file", pathInRoot(F->FilePath, Result.Root)},
        {"line", F->Line},
        {"column", F->Column},
        {"reason", reportItemReason(*F)}});
  llvm::json::Array Notes;
  for (const std::string &Note : Result.Notes)
    Notes.push_back(Note);
  llvm::json::Object Document{
      {"tool", "ddpify"},
      {"mode", Options.RunMode == Mode::Diff ? "diff" : "migrate"},
      {"root", Result.Root},
      {"applied", Applied},
      {"summary", llvm::json::Object{{"filesChanged", S.Files.size()},
                                     {"items", S.Items.size()},
                                     {"rules", countsJson(S.Totals)}}},
      {"files", std::move(Files)},
      {"items", std::move(Items)},
      {"notes", std::move(Notes)}};
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << llvm::formatv("{0:2}", llvm::json::Value(std::move(Document))) << "\n";
  return Text;
}

int migrateAndReport(const ToolOptions &Options, const PipelineResult &Result) {
  return withReport(Options, Result, [&] {
    int Status = writeMigration(Options, Result);
    printReport(Options, Result, /*Applied=*/Status != ExitError);
    return withUnsafe(Status, Result);
  });
}

int diffAndReport(const ToolOptions &Options, const PipelineResult &Result,
                  llvm::raw_ostream &OS) {
  return withReport(Options, Result, [&] {
    int Status = Options.DiffRdjson ? printDiffRdjson(Result, OS)
                                    : printDiff(Result, OS);
    OS.flush();
    printReport(Options, Result);
    return withUnsafe(Status, Result);
  });
}

} // namespace ddpify
