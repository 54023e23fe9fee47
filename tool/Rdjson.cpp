//===- Rdjson.cpp - reviewdog's diagnostic format -------------------------===//

#include "Rdjson.h"
#include "BuildConfig.h"
#include "Output.h"
#include "ddpify/EditSet.h"
#include "ddpify/SourceLines.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include <set>
#include <vector>

namespace ddpify {
namespace {

/// The byte offset of each line's start in Code.
std::vector<size_t> lineStarts(llvm::StringRef Code) {
  std::vector<size_t> Starts;
  for (size_t At = 0; At < Code.size();) {
    Starts.push_back(At);
    size_t Newline = Code.find('\n', At);
    At = Newline == llvm::StringRef::npos ? Code.size() : Newline + 1;
  }
  return Starts;
}

/// The start of line Index (0-based), or the end of Code past the last one.
size_t startOf(const std::vector<size_t> &Starts, size_t Index,
               llvm::StringRef Code) {
  return Index < Starts.size() ? Starts[Index] : Code.size();
}

llvm::json::Object position(llvm::StringRef Code, size_t Offset) {
  llvm::StringRef Before = Code.take_front(std::min(Offset, Code.size()));
  return llvm::json::Object{
      {"line", static_cast<int64_t>(1 + Before.count('\n'))},
      {"column", static_cast<int64_t>(1 + Before.size() -
                                      lineStart(Code, Before.size()))}};
}

/// What one run of changed lines is for: the lines of the rules and report
/// items behind it, and the rule that names it.
struct RunCause {
  std::vector<std::string> Lines;
  std::string RuleId;
  bool Error = false;
};

void addCause(RunCause &Cause, std::set<std::string> &Seen, const Finding &F,
              const std::string &Line) {
  if (!Seen.insert(Line).second)
    return;
  Cause.Lines.push_back(Line);
  if (Cause.RuleId.empty())
    Cause.RuleId = F.RuleId;
  Cause.Error |= F.Level == ReportLevel::Error && !F.NotRewrittenReason.empty();
}

/// The findings of File behind the run of old bytes [Begin, End]: the rules
/// whose edits touch it, and the report items in the Widened bytes (their
/// `// ddpify:` comment goes above their line).
RunCause causeOf(const PipelineResult &Result, llvm::StringRef File,
                 size_t Begin, size_t End, const LineSuggestion &Widened,
                 llvm::StringRef NewText, bool OldHasInclude) {
  RunCause Cause;
  std::set<std::string> Seen;
  for (const Finding &F : Result.Findings) {
    if (F.FilePath != File)
      continue;
    if (!F.NotRewrittenReason.empty()) {
      if (F.Offset >= Widened.Begin && F.Offset < Widened.End)
        addCause(Cause, Seen, F,
                 (F.RuleId.empty() ? F.CheckName : F.RuleId) +
                     (F.ReportId.empty() ? "" : " (" + F.ReportId + ")") +
                     ": " + F.NotRewrittenReason);
      continue;
    }
    if (!isRewritten(F))
      continue;
    for (const FindingEdit &E : F.Edits)
      if (E.Offset <= End && E.Offset + E.Length >= Begin) {
        addCause(Cause, Seen, F,
                 (F.RuleId.empty() ? F.CheckName : F.RuleId) + ": " +
                     F.Message);
        break;
      }
  }
  // R9 and R10 edit files without a finding of their own.
  if (NewText.contains("#include <ddp/ddp.h>") && !OldHasInclude) {
    Cause.Lines.push_back("R9: include the ddp runtime, <ddp/ddp.h>, in a "
                          "file the migration changes");
    if (Cause.RuleId.empty())
      Cause.RuleId = "R9";
  }
  llvm::StringRef Name = llvm::sys::path::filename(File);
  if (Cause.Lines.empty() &&
      (Name == "CMakeLists.txt" || Name.ends_with(".cmake"))) {
    Cause.Lines.push_back("R10: the CMake build links the ddp runtime "
                          "(find_package(ddpify REQUIRED), ddpify::runtime)");
    Cause.RuleId = "R10";
  }
  if (Cause.Lines.empty())
    Cause.Lines.push_back("ddpify migrate rewrites these lines");
  return Cause;
}

} // namespace

LineSuggestion wholeLines(llvm::StringRef Code, size_t Offset, size_t Length,
                          llvm::StringRef Replacement) {
  Offset = std::min(Offset, Code.size());
  size_t EditEnd = std::min(Offset + Length, Code.size());
  LineSuggestion S;
  S.Begin = lineStart(Code, Offset);
  if (EditEnd > Offset && Code[EditEnd - 1] == '\n') {
    S.End = EditEnd; // the edit ends with its last line
  } else {
    size_t Newline = Code.find('\n', EditEnd);
    S.End = Newline == llvm::StringRef::npos ? Code.size() : Newline + 1;
  }
  if (S.Begin == S.End && S.Begin == Code.size() && S.Begin > 0) {
    // An insertion at the end of the file: on the last line.
    size_t Last = Code.rfind('\n', Code.size() - 1);
    S.Begin = Last == llvm::StringRef::npos ? 0 : Last + 1;
  }
  S.Text =
      (Code.slice(S.Begin, Offset) + Replacement + Code.slice(EditEnd, S.End))
          .str();
  // Lines that become one empty line would read as lines deleted (an empty
  // suggestion): the next line (or the one before) goes along.
  if (S.Text == "\n" && S.End > S.Begin) {
    if (S.End < Code.size()) {
      size_t Newline = Code.find('\n', S.End);
      size_t Next =
          Newline == llvm::StringRef::npos ? Code.size() : Newline + 1;
      S.Text += Code.slice(S.End, Next).str();
      S.End = Next;
    } else if (S.Begin > 0) {
      size_t Previous = Code.rfind('\n', S.Begin - 1);
      Previous = Previous == llvm::StringRef::npos ? 0 : Previous + 1;
      S.Text = Code.slice(Previous, S.Begin).str() + S.Text;
      S.Begin = Previous;
    }
  }
  return S;
}

llvm::json::Object rdjsonRange(llvm::StringRef Code, size_t Begin, size_t End) {
  return llvm::json::Object{{"start", position(Code, Begin)},
                            {"end", position(Code, End)}};
}

llvm::json::Object rdjsonLineRange(llvm::StringRef Code,
                                   const LineSuggestion &S) {
  auto Line = [&](size_t Offset) {
    return static_cast<int64_t>(
        1 + Code.take_front(std::min(Offset, Code.size())).count('\n'));
  };
  int64_t First = Line(S.Begin);
  int64_t Last = S.End > S.Begin ? Line(S.End - 1) : First;
  return llvm::json::Object{{"start", llvm::json::Object{{"line", First}}},
                            {"end", llvm::json::Object{{"line", Last}}}};
}

llvm::json::Object rdjsonSuggestion(llvm::StringRef Code,
                                    const LineSuggestion &S) {
  // Line-wise, the text is the new lines without the line break that ends
  // the last one (reviewdog and GitHub add it back).
  llvm::StringRef Text = S.Text;
  if (S.End > S.Begin && Code[S.End - 1] == '\n')
    Text.consume_back("\n");
  return llvm::json::Object{{"range", rdjsonLineRange(Code, S)},
                            {"text", Text.str()}};
}

std::string rdjsonPath(llvm::StringRef File, llvm::StringRef Root) {
  llvm::StringRef Rest = File;
  if (!Root.empty() && Rest.consume_front(Root) && Rest.starts_with("/"))
    return Rest.ltrim('/').str();
  return File.str();
}

void printRdjsonResult(llvm::json::Array Diagnostics, llvm::raw_ostream &OS) {
  llvm::json::Value Document = llvm::json::Object{
      {"source",
       llvm::json::Object{{"name", "ddpify"}, {"url", build::DocsUrl}}},
      {"diagnostics", std::move(Diagnostics)},
  };
  OS << llvm::formatv("{0:2}", Document) << "\n";
}

std::string ruleDocsUrl(llvm::StringRef RuleId) {
  llvm::StringRef Docs = build::DocsUrl;
  if (!Docs.consume_back("checks.md"))
    return build::DocsUrl;
  return (Docs + "rules/" + RuleId + ".md").str();
}

int printDiffRdjson(const PipelineResult &Result, llvm::raw_ostream &OS) {
  llvm::json::Array Diagnostics;
  for (const auto &[File, Edits] : Result.Edits.files()) {
    std::optional<std::string> Old, New;
    if (!readBeforeAndAfter(Result, File, Old, New))
      return ExitError;
    std::vector<size_t> OldStarts = lineStarts(*Old);
    std::vector<size_t> NewStarts = lineStarts(*New);
    for (const ChangedLines &Run : changedLines(*Old, *New)) {
      size_t Begin = startOf(OldStarts, Run.OldBegin, *Old);
      size_t End = startOf(OldStarts, Run.OldEnd, *Old);
      size_t NewBegin = startOf(NewStarts, Run.NewBegin, *New);
      llvm::StringRef NewText = llvm::StringRef(*New).slice(
          NewBegin, startOf(NewStarts, Run.NewEnd, *New));
      // The run's old lines, as migrated; an insertion between lines takes
      // a neighbour line along (wholeLines).
      LineSuggestion S = wholeLines(*Old, Begin, End - Begin, NewText);
      RunCause Cause = causeOf(Result, File, Begin, End, S, NewText,
                               llvm::StringRef(*Old)
                                   .slice(Begin, End)
                                   .contains("#include <ddp/ddp.h>"));
      std::string Message;
      for (const std::string &Line : Cause.Lines)
        Message += (Message.empty() ? "" : "\n") + Line;
      llvm::json::Object Diagnostic{
          {"message", Message},
          {"location",
           llvm::json::Object{{"path", rdjsonPath(File, Result.Root)},
                              {"range", rdjsonLineRange(*Old, S)}}},
          {"severity", Cause.Error ? "ERROR" : "WARNING"},
          {"suggestions", llvm::json::Array{rdjsonSuggestion(*Old, S)}},
      };
      if (!Cause.RuleId.empty())
        Diagnostic["code"] = llvm::json::Object{
            {"value", Cause.RuleId}, {"url", ruleDocsUrl(Cause.RuleId)}};
      Diagnostics.push_back(std::move(Diagnostic));
    }
  }
  bool Changed = !Diagnostics.empty();
  printRdjsonResult(std::move(Diagnostics), OS);
  return Changed ? ExitFindings : ExitOk;
}

} // namespace ddpify
