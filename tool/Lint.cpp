//===- Lint.cpp - lint output, suppression and selection ------------------===//

#include "Lint.h"
#include "BuildConfig.h"
#include "CheckGlobs.h"
#include "Output.h"
#include "Rdjson.h"
#include "ddpify/AtomicFile.h"
#include "ddpify/EditSet.h"
#include "ddpify/Registry.h"
#include "ddpify/SourceLines.h"
#include "clang/Tooling/DiagnosticsYaml.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/YAMLTraits.h"
#include <map>
#include <optional>
#include <set>

namespace ddpify {
namespace {

llvm::SmallVector<llvm::StringRef, 0> splitLinesNoEol(llvm::StringRef Code) {
  llvm::SmallVector<llvm::StringRef, 0> Lines;
  Code.split(Lines, '\n');
  return Lines;
}

enum class NolintKind { Plain, NextLine, Begin, End };

struct NolintComment {
  NolintKind Kind;
  std::string Checks; ///< The text between the parentheses; "*" for none.
  bool Valid = true;  ///< False for an unclosed parenthesis.
};

/// Every NOLINT marker on one line.
std::vector<NolintComment> nolintsOnLine(llvm::StringRef Line) {
  std::vector<NolintComment> Comments;
  size_t Pos = 0;
  while ((Pos = Line.find("NOLINT", Pos)) != llvm::StringRef::npos) {
    llvm::StringRef Rest = Line.drop_front(Pos + 6);
    NolintComment C{NolintKind::Plain, "*"};
    if (Rest.consume_front("NEXTLINE"))
      C.Kind = NolintKind::NextLine;
    else if (Rest.consume_front("BEGIN"))
      C.Kind = NolintKind::Begin;
    else if (Rest.consume_front("END"))
      C.Kind = NolintKind::End;
    if (Rest.consume_front("(")) {
      size_t Close = Rest.find(')');
      if (Close == llvm::StringRef::npos)
        C.Valid = false;
      else
        C.Checks = Rest.take_front(Close).str();
    }
    Comments.push_back(std::move(C));
    Pos += 6;
  }
  return Comments;
}

/// Whether a NOLINT's check list covers CheckName (whitespace is ignored,
/// as in clang-tidy).
bool nolintCovers(const NolintComment &C, llvm::StringRef CheckName) {
  if (!C.Valid)
    return false;
  std::string Globs;
  for (char Ch : C.Checks)
    if (!llvm::isSpace(Ch))
      Globs += Ch;
  return matchesGlobList(Globs, CheckName);
}

struct Located {
  unsigned Line = 1, Column = 1;
};

Located locate(llvm::StringRef Code, size_t Offset) {
  Offset = std::min(Offset, Code.size());
  llvm::StringRef Before = Code.take_front(Offset);
  Located L;
  L.Line = 1 + Before.count('\n');
  L.Column = 1 + Offset - lineStart(Code, Offset);
  return L;
}

/// One diagnostic that is printed: a Finding and what lint decided about it.
struct Reported {
  const Finding *F;
  bool IsError;
  /// The fix-it as one replacement (what the text, JSON and SARIF output
  /// show)...
  std::optional<clang::tooling::Replacement> Edit;
  /// ...and as the edits it is made of (what --fix and --export-fixes
  /// apply: a guarded block's edits leave the lines between them to other
  /// fix-its).
  std::vector<clang::tooling::Replacement> Parts;
  /// Whether the text output folds it into its file's summary line.
  bool Folded = false;
};

llvm::StringRef levelName(CheckLevel Level) {
  switch (Level) {
  case CheckLevel::Hazard:
    return "hazard";
  case CheckLevel::Rewrite:
    return "rewrite";
  case CheckLevel::RewriteUntilDistributed:
    return "rewrite-until-distributed";
  }
  return "hazard";
}

class SourceCache {
public:
  llvm::StringRef get(const std::string &Path) {
    auto It = Files.find(Path);
    if (It == Files.end()) {
      llvm::Expected<std::string> Code = readFile(Path);
      std::string Text;
      if (Code)
        Text = std::move(*Code);
      else
        llvm::consumeError(Code.takeError());
      It = Files.emplace(Path, std::move(Text)).first;
    }
    return It->second;
  }

private:
  std::map<std::string, std::string> Files;
};

std::string relativeToRoot(llvm::StringRef Path, llvm::StringRef Root) {
  llvm::StringRef Rest = Path;
  if (Rest.consume_front(Root) && (Rest.empty() || Rest.front() == '/'))
    return Rest.ltrim('/').str();
  return Path.str();
}

/// A path as URI text: unreserved characters and '/' kept, the rest
/// percent-encoded (RFC 3986).
std::string relativeUri(llvm::StringRef Relative) {
  std::string Uri;
  for (char C : Relative) {
    if (llvm::isAlnum(C) || llvm::StringRef("/-._~").contains(C))
      Uri += C;
    else
      Uri += llvm::formatv("%{0:X-2}", static_cast<unsigned char>(C)).str();
  }
  return Uri;
}

std::string fileUri(llvm::StringRef AbsolutePath) {
  return "file://" + relativeUri(AbsolutePath);
}

std::string helpUri(llvm::StringRef CheckName) {
  return (llvm::Twine(build::DocsUrl) + "#" + CheckName).str();
}

//===--------------------------------------------------------------------===//
// Text
//===--------------------------------------------------------------------===//

/// The source line holding Offset and a caret (with `~` over Length bytes
/// on that line) under it; returns the caret's indentation.
std::string printSourceLine(llvm::StringRef Code, size_t Offset, size_t Length,
                            llvm::raw_ostream &OS) {
  size_t LineStart = lineStart(Code, Offset);
  size_t LineEnd = Code.find('\n', Offset);
  llvm::StringRef Line = Code.slice(LineStart, LineEnd);
  std::string Indent;
  for (char C : Line.take_front(Offset - LineStart))
    Indent += C == '\t' ? '\t' : ' ';
  size_t Marked = std::max<size_t>(
      1, std::min<size_t>(Length, Line.size() - (Offset - LineStart)));
  OS << Line << "\n" << Indent;
  OS.changeColor(llvm::raw_ostream::GREEN, true);
  OS << "^" << std::string(Marked - 1, '~');
  OS.resetColor();
  OS << "\n";
  return Indent;
}

void printNoteHeader(llvm::StringRef File, unsigned Line, unsigned Column,
                     llvm::StringRef Message, llvm::raw_ostream &OS) {
  OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, true);
  OS << File << ":" << Line << ":" << Column << ": ";
  OS.changeColor(llvm::raw_ostream::BLACK, true) << "note: ";
  OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, true);
  OS << Message;
  OS.resetColor();
  OS << "\n";
}

/// One line per file for its folded findings: how many, of which checks,
/// and how to see them.
void printFoldedSummaries(const std::vector<Reported> &Diags,
                          llvm::raw_ostream &OS) {
  std::vector<std::string> Files;
  std::map<std::string, std::map<std::string, unsigned>> Counts;
  for (const Reported &R : Diags) {
    if (!R.Folded)
      continue;
    auto &PerCheck = Counts[R.F->FilePath];
    if (PerCheck.empty())
      Files.push_back(R.F->FilePath);
    ++PerCheck[R.F->CheckName];
  }
  for (const std::string &File : Files) {
    unsigned Total = 0;
    std::string List;
    for (const auto &[Check, Count] : Counts[File]) {
      Total += Count;
      List += (List.empty() ? "" : ", ") + Check + " (" +
              std::to_string(Count) + ")";
    }
    OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, true);
    OS << File << ": ";
    OS.changeColor(llvm::raw_ostream::BLACK, true) << "note: ";
    OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, true);
    OS << Total << " finding" << (Total == 1 ? "" : "s")
       << " not listed, which 'ddpify migrate' rewrites: " << List
       << "; 'ddpify diff' shows the edits, --show-migration lists them";
    OS.resetColor();
    OS << "\n";
  }
}

void printText(const std::vector<Reported> &Diags, SourceCache &Sources,
               llvm::raw_ostream &OS) {
  for (const Reported &R : Diags) {
    if (R.Folded)
      continue;
    const Finding &F = *R.F;
    OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true);
    OS << F.FilePath << ":" << F.Line << ":" << F.Column << ": ";
    if (R.IsError)
      OS.changeColor(llvm::raw_ostream::RED, true) << "error: ";
    else
      OS.changeColor(llvm::raw_ostream::MAGENTA, true) << "warning: ";
    OS.changeColor(llvm::raw_ostream::SAVEDCOLOR, true);
    OS << F.diagnosticMessage();
    OS << " [" << F.CheckName << (R.IsError ? ",-warnings-as-errors" : "")
       << "]";
    OS.resetColor();
    OS << "\n";
    llvm::StringRef Code = Sources.get(F.FilePath);
    if (F.Offset <= Code.size()) {
      std::string Indent = printSourceLine(Code, F.Offset, F.Length, OS);
      if (R.Edit) {
        OS << Indent;
        OS.changeColor(llvm::raw_ostream::GREEN, false);
        OS << R.Edit->getReplacementText();
        OS.resetColor();
        OS << "\n";
      }
    }
    if (F.InMacro && !F.MacroName.empty())
      printNoteHeader(F.FilePath, F.Line, F.Column,
                      "expanded from macro '" + F.MacroName +
                          "': code in macro expansions is never rewritten",
                      OS);
    for (const FindingNote &Note : F.Notes) {
      printNoteHeader(Note.FilePath, Note.Line, Note.Column, Note.Message, OS);
      llvm::StringRef NoteCode = Sources.get(Note.FilePath);
      if (Note.Offset <= NoteCode.size())
        printSourceLine(NoteCode, Note.Offset, 1, OS);
    }
  }
  printFoldedSummaries(Diags, OS);
}

//===--------------------------------------------------------------------===//
// JSON
//===--------------------------------------------------------------------===//

llvm::json::Object jsonEdit(const clang::tooling::Replacement &Edit,
                            SourceCache &Sources) {
  llvm::StringRef Code = Sources.get(Edit.getFilePath().str());
  Located Begin = locate(Code, Edit.getOffset());
  Located End = locate(Code, Edit.getOffset() + Edit.getLength());
  return llvm::json::Object{
      {"file", Edit.getFilePath()}, {"offset", Edit.getOffset()},
      {"length", Edit.getLength()}, {"line", Begin.Line},
      {"column", Begin.Column},     {"endLine", End.Line},
      {"endColumn", End.Column},    {"replacement", Edit.getReplacementText()},
  };
}

void printJson(const std::vector<Reported> &Diags, const PipelineResult &Result,
               SourceCache &Sources, llvm::raw_ostream &OS) {
  llvm::json::Array Findings;
  for (const Reported &R : Diags) {
    const Finding &F = *R.F;
    llvm::StringRef Code = Sources.get(F.FilePath);
    Located End = locate(Code, F.Offset + F.Length);
    llvm::json::Array Fixes;
    if (R.Edit)
      Fixes.push_back(jsonEdit(*R.Edit, Sources));
    llvm::json::Object Item{
        {"check", F.CheckName},
        {"rule", F.RuleId},
        {"level", R.IsError ? "error" : "warning"},
        {"category", levelName(checkLevel(F.CheckName))},
        {"file", F.FilePath},
        {"relativePath", relativeToRoot(F.FilePath, Result.Root)},
        {"line", F.Line},
        {"column", F.Column},
        {"endLine", End.Line},
        {"endColumn", End.Column},
        {"offset", F.Offset},
        {"length", F.Length},
        {"message", F.Message},
        {"inMacro", F.InMacro},
        {"fixes", std::move(Fixes)},
    };
    if (F.InMacro)
      Item["macro"] = F.MacroName;
    llvm::json::Array Notes;
    for (const FindingNote &Note : F.Notes)
      Notes.push_back(llvm::json::Object{
          {"file", Note.FilePath},
          {"relativePath", relativeToRoot(Note.FilePath, Result.Root)},
          {"line", Note.Line},
          {"column", Note.Column},
          {"offset", Note.Offset},
          {"message", Note.Message},
      });
    Item["notes"] = std::move(Notes);
    Findings.push_back(std::move(Item));
  }
  llvm::json::Value Document = llvm::json::Object{
      {"tool", "ddpify"},
      {"version", build::Version},
      {"root", Result.Root},
      {"findings", std::move(Findings)},
  };
  OS << llvm::formatv("{0:2}", Document) << "\n";
}

//===--------------------------------------------------------------------===//
// SARIF 2.1.0
//===--------------------------------------------------------------------===//

llvm::json::Object sarifLocation(llvm::StringRef File,
                                 const PipelineResult &Result) {
  std::string Relative = relativeToRoot(File, Result.Root);
  if (Relative == File)
    return llvm::json::Object{{"uri", fileUri(File)}};
  return llvm::json::Object{{"uri", relativeUri(Relative)},
                            {"uriBaseId", "SRCROOT"}};
}

llvm::json::Object sarifRegion(llvm::StringRef Code, size_t Offset,
                               size_t Length) {
  Located Begin = locate(Code, Offset);
  Located End = locate(Code, Offset + Length);
  return llvm::json::Object{
      {"startLine", Begin.Line}, {"startColumn", Begin.Column},
      {"endLine", End.Line},     {"endColumn", End.Column},
      {"charOffset", Offset},    {"charLength", Length},
  };
}

void printSarif(const std::vector<Reported> &Diags,
                const PipelineResult &Result, SourceCache &Sources,
                llvm::raw_ostream &OS) {
  llvm::json::Array Rules;
  std::map<std::string, unsigned> RuleIndex;
  for (const RuleInfo &Rule : allRules()) {
    if (Rule.CheckName.empty())
      continue;
    RuleIndex[Rule.CheckName.str()] = Rules.size();
    Rules.push_back(llvm::json::Object{
        {"id", Rule.CheckName},
        {"name", Rule.CheckName},
        {"shortDescription", llvm::json::Object{{"text", Rule.Summary}}},
        {"helpUri", helpUri(Rule.CheckName)},
        {"properties", llvm::json::Object{{"migrationRule", Rule.RuleId},
                                          {"category", levelName(Rule.Level)}}},
        {"defaultConfiguration", llvm::json::Object{{"level", "warning"}}},
    });
  }

  llvm::json::Array Results;
  for (const Reported &R : Diags) {
    const Finding &F = *R.F;
    llvm::StringRef Code = Sources.get(F.FilePath);
    llvm::json::Object Region = sarifRegion(Code, F.Offset, F.Length);
    // Clang's line and column (which count bytes) are authoritative.
    Region["startLine"] = F.Line;
    Region["startColumn"] = F.Column;
    llvm::json::Object Item{
        {"ruleId", F.CheckName},
        {"level", R.IsError ? "error" : "warning"},
        {"message", llvm::json::Object{{"text", F.diagnosticMessage()}}},
        {"locations",
         llvm::json::Array{llvm::json::Object{
             {"physicalLocation",
              llvm::json::Object{
                  {"artifactLocation", sarifLocation(F.FilePath, Result)},
                  {"region", std::move(Region)},
              }}}}},
    };
    auto Index = RuleIndex.find(F.CheckName);
    if (Index != RuleIndex.end())
      Item["ruleIndex"] = Index->second;
    if (!F.Notes.empty()) {
      llvm::json::Array Related;
      for (const FindingNote &Note : F.Notes) {
        llvm::json::Object NoteRegion =
            sarifRegion(Sources.get(Note.FilePath), Note.Offset, 0);
        NoteRegion["startLine"] = Note.Line;
        NoteRegion["startColumn"] = Note.Column;
        NoteRegion.erase("endLine");
        NoteRegion.erase("endColumn");
        NoteRegion.erase("charLength");
        Related.push_back(llvm::json::Object{
            {"id", static_cast<int64_t>(Related.size())},
            {"message", llvm::json::Object{{"text", Note.Message}}},
            {"physicalLocation",
             llvm::json::Object{
                 {"artifactLocation", sarifLocation(Note.FilePath, Result)},
                 {"region", std::move(NoteRegion)},
             }},
        });
      }
      Item["relatedLocations"] = std::move(Related);
    }
    if (R.Edit) {
      const clang::tooling::Replacement &Edit = *R.Edit;
      llvm::StringRef EditCode = Sources.get(Edit.getFilePath().str());
      Item["fixes"] = llvm::json::Array{llvm::json::Object{
          {"description",
           llvm::json::Object{
               {"text",
                ("replace with '" + Edit.getReplacementText() + "'").str()}}},
          {"artifactChanges",
           llvm::json::Array{llvm::json::Object{
               {"artifactLocation", sarifLocation(Edit.getFilePath(), Result)},
               {"replacements",
                llvm::json::Array{llvm::json::Object{
                    {"deletedRegion",
                     sarifRegion(EditCode, Edit.getOffset(), Edit.getLength())},
                    {"insertedContent",
                     llvm::json::Object{{"text", Edit.getReplacementText()}}},
                }}},
           }}},
      }};
    }
    Results.push_back(std::move(Item));
  }

  std::string RootUri = fileUri(Result.Root);
  if (!llvm::StringRef(RootUri).ends_with("/"))
    RootUri += "/";
  llvm::json::Object Driver{
      {"name", "ddpify"},
      {"version", build::Version},
      {"informationUri", build::DocsUrl},
      {"rules", std::move(Rules)},
  };
  llvm::json::Object Run{
      {"tool", llvm::json::Object{{"driver", std::move(Driver)}}},
      {"originalUriBaseIds",
       llvm::json::Object{{"SRCROOT", llvm::json::Object{{"uri", RootUri}}}}},
      {"results", std::move(Results)},
  };
  llvm::json::Value Log = llvm::json::Object{
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", llvm::json::Array{std::move(Run)}},
  };
  OS << llvm::formatv("{0:2}", Log) << "\n";
}

//===--------------------------------------------------------------------===//
// rdjson (reviewdog)
//===--------------------------------------------------------------------===//

/// Each finding a diagnostic; its fix-it one suggestion on the whole lines it
/// touches (Rdjson.h), its notes related locations.
void printRdjson(const std::vector<Reported> &Diags,
                 const PipelineResult &Result, SourceCache &Sources,
                 llvm::raw_ostream &OS) {
  llvm::json::Array Diagnostics;
  for (const Reported &R : Diags) {
    const Finding &F = *R.F;
    llvm::StringRef Code = Sources.get(F.FilePath);
    llvm::json::Object Range = rdjsonRange(Code, F.Offset, F.Offset + F.Length);
    // Clang's line and column (which count bytes) are authoritative.
    Range["start"] = llvm::json::Object{{"line", F.Line}, {"column", F.Column}};
    llvm::json::Object Item{
        {"message", F.diagnosticMessage()},
        {"location",
         llvm::json::Object{{"path", rdjsonPath(F.FilePath, Result.Root)},
                            {"range", std::move(Range)}}},
        {"severity", R.IsError ? "ERROR" : "WARNING"},
        {"code", llvm::json::Object{{"value", F.CheckName},
                                    {"url", helpUri(F.CheckName)}}},
    };
    if (R.Edit && R.Edit->getFilePath() == F.FilePath) {
      // reviewdog posts a suggestion on the lines of its diagnostic: the
      // location becomes the fix-it's whole lines.
      LineSuggestion S =
          wholeLines(Code, R.Edit->getOffset(), R.Edit->getLength(),
                     R.Edit->getReplacementText());
      Item["location"] =
          llvm::json::Object{{"path", rdjsonPath(F.FilePath, Result.Root)},
                             {"range", rdjsonLineRange(Code, S)}};
      Item["suggestions"] = llvm::json::Array{rdjsonSuggestion(Code, S)};
    }
    if (!F.Notes.empty()) {
      llvm::json::Array Related;
      for (const FindingNote &Note : F.Notes)
        Related.push_back(llvm::json::Object{
            {"message", Note.Message},
            {"location",
             llvm::json::Object{
                 {"path", rdjsonPath(Note.FilePath, Result.Root)},
                 {"range",
                  llvm::json::Object{
                      {"start",
                       llvm::json::Object{{"line", Note.Line},
                                          {"column", Note.Column}}}}}}},
        });
      Item["related_locations"] = std::move(Related);
    }
    Diagnostics.push_back(std::move(Item));
  }
  printRdjsonResult(std::move(Diagnostics), OS);
}

//===--------------------------------------------------------------------===//
// Fixes
//===--------------------------------------------------------------------===//

bool sameEdit(const clang::tooling::Replacement &A,
              const clang::tooling::Replacement &B) {
  return A.getFilePath() == B.getFilePath() && A.getOffset() == B.getOffset() &&
         A.getLength() == B.getLength() &&
         A.getReplacementText() == B.getReplacementText();
}

/// Whether F's fix-it needs `#include <ddp/ddp.h>`: a migration rule's edit
/// does (migrate adds it to every file it changes); a lint-only check's
/// fix-it only when it names the runtime.
bool needsRuntimeInclude(const Reported &R) {
  return !R.F->RuleId.empty() || R.Edit->getReplacementText().contains("ddp::");
}

/// The edits migrate would make for the reported findings: their fix-its
/// plus R9's include in each file a fix-it that needs it changes.
llvm::Error collectEdits(const std::vector<Reported> &Diags, EditSet &Edits) {
  for (const Reported &R : Diags)
    if (R.Edit && needsRuntimeInclude(R))
      for (const clang::tooling::Replacement &Part : R.Parts)
        if (llvm::Error Err = Edits.add(Part, R.F->RuleId))
          return Err;
  if (llvm::Error Err = Edits.addRuntimeIncludes())
    return Err;
  for (const Reported &R : Diags)
    if (R.Edit && !needsRuntimeInclude(R))
      for (const clang::tooling::Replacement &Part : R.Parts)
        if (llvm::Error Err = Edits.add(Part, R.F->CheckName))
          return Err;
  return llvm::Error::success();
}

/// Writes the clang-tidy YAML of Diags to a temporary beside --export-fixes
/// (Export), renamed into place once --fix, if asked, wrote its files too.
int exportFixes(const ToolOptions &Options, const LintOptions &LintOpts,
                const std::vector<Reported> &Diags, const EditSet &Edits,
                llvm::StringRef MainSource,
                std::optional<PendingFile> &Export) {
  namespace tooling = clang::tooling;
  llvm::SmallString<256> BuildDir;
  llvm::sys::fs::current_path(BuildDir);
  tooling::TranslationUnitDiagnostics Document;
  llvm::SmallString<256> Main(MainSource);
  llvm::sys::fs::make_absolute(Main);
  Document.MainSourceFile = Main.str().str();

  // Edits that are no finding's own fix-it (the R9 include) ride on the
  // first diagnostic with a fix-it in their file.
  std::set<std::string> FilesWithExtras;
  for (const Reported &R : Diags) {
    const Finding &F = *R.F;
    tooling::DiagnosticMessage Message(F.diagnosticMessage());
    Message.FilePath = F.FilePath;
    Message.FileOffset = F.Offset;
    if (R.Edit) {
      std::string File = R.Edit->getFilePath().str();
      tooling::Replacements &Fix = Message.Fix[File];
      for (const tooling::Replacement &Part : R.Parts)
        if (llvm::Error Err = Fix.add(Part))
          return llvm::errs()
                     << "ddpify: error: " << toString(std::move(Err)) << "\n",
                 ExitError;
      auto PerFile = Edits.files().find(File);
      if (PerFile != Edits.files().end() && FilesWithExtras.insert(File).second)
        for (const tooling::Replacement &Edit : PerFile->second) {
          bool OwnFix = false;
          for (const Reported &Other : Diags)
            for (const tooling::Replacement &Part : Other.Parts)
              OwnFix |= sameEdit(Part, Edit);
          if (OwnFix)
            continue;
          if (llvm::Error Err = Fix.add(Edit))
            return llvm::errs()
                       << "ddpify: error: " << toString(std::move(Err)) << "\n",
                   ExitError;
        }
    }
    llvm::SmallVector<tooling::DiagnosticMessage, 1> Notes;
    for (const FindingNote &Note : F.Notes) {
      tooling::DiagnosticMessage NoteMessage(Note.Message);
      NoteMessage.FilePath = Note.FilePath;
      NoteMessage.FileOffset = Note.Offset;
      Notes.push_back(std::move(NoteMessage));
    }
    Document.Diagnostics.emplace_back(F.CheckName, Message, Notes,
                                      R.IsError ? tooling::Diagnostic::Error
                                                : tooling::Diagnostic::Warning,
                                      BuildDir.str());
  }

  std::string Yaml;
  {
    llvm::raw_string_ostream YamlStream(Yaml);
    llvm::yaml::Output YamlOutput(YamlStream);
    YamlOutput << Document;
  }
  llvm::Expected<PendingFile> Pending =
      writePending(LintOpts.ExportFixes, Yaml);
  if (!Pending) {
    llvm::errs() << "ddpify: error: " << llvm::toString(Pending.takeError())
                 << "; nothing written\n";
    return ExitError;
  }
  Export = std::move(*Pending);
  return ExitOk;
}

} // namespace

bool isSuppressedByNolint(llvm::StringRef Code, unsigned Line,
                          llvm::StringRef CheckName) {
  llvm::SmallVector<llvm::StringRef, 0> Lines = splitLinesNoEol(Code);
  if (Line == 0 || Line > Lines.size())
    return false;
  for (const NolintComment &C : nolintsOnLine(Lines[Line - 1]))
    if (C.Kind == NolintKind::Plain && nolintCovers(C, CheckName))
      return true;
  if (Line >= 2)
    for (const NolintComment &C : nolintsOnLine(Lines[Line - 2]))
      if (C.Kind == NolintKind::NextLine && nolintCovers(C, CheckName))
        return true;
  // NOLINTBEGIN(x) ... NOLINTEND(x): an END closes the latest BEGIN with the
  // same check list; an unmatched BEGIN suppresses nothing (clang-tidy
  // reports it as an error).
  std::vector<std::pair<NolintComment, unsigned>> Open;
  for (unsigned I = 0; I < Lines.size(); ++I)
    for (NolintComment &C : nolintsOnLine(Lines[I])) {
      if (C.Kind == NolintKind::Begin) {
        Open.emplace_back(C, I + 1);
        continue;
      }
      if (C.Kind != NolintKind::End)
        continue;
      for (size_t K = Open.size(); K-- > 0;) {
        if (Open[K].first.Checks != C.Checks)
          continue;
        if (Open[K].second <= Line && Line <= I + 1 &&
            nolintCovers(Open[K].first, CheckName))
          return true;
        Open.erase(Open.begin() + K);
        break;
      }
    }
  return false;
}

int runLint(const ToolOptions &Options, const LintOptions &LintOpts,
            const PipelineResult &Result, llvm::raw_ostream &OS) {
  SourceCache Sources;
  std::vector<Reported> Diags;
  unsigned Suppressed = 0, Errors = 0, Folded = 0;
  // Not yet distributed: a main without ddp::init (R1 would add it). A run
  // that sees no main does not know, and folds only what is never a hazard.
  bool NotYetDistributed = llvm::any_of(
      Result.Findings, [](const Finding &F) { return F.RuleId == "R1"; });
  for (const Finding &F : Result.Findings) {
    // Rules without a check (R9, ...) are migrate-only.
    if (F.CheckName.empty() || !matchesGlobList(Options.Checks, F.CheckName))
      continue;
    if (isSuppressedByNolint(Sources.get(F.FilePath), F.Line, F.CheckName)) {
      ++Suppressed;
      continue;
    }
    Reported R{&F, matchesGlobList(LintOpts.WarningsAsErrors, F.CheckName),
               editFor(F), editsFor(F)};
    CheckLevel Level = checkLevel(F.CheckName);
    R.Folded =
        !LintOpts.ShowMigration && !R.IsError &&
        LintOpts.Format == LintFormat::Text &&
        (Level == CheckLevel::Rewrite ||
         (Level == CheckLevel::RewriteUntilDistributed && NotYetDistributed));
    Folded += R.Folded;
    Errors += R.IsError;
    Diags.push_back(std::move(R));
  }

  switch (LintOpts.Format) {
  case LintFormat::Text: {
    bool Colors = LintOpts.Color == ColorMode::Always ||
                  (LintOpts.Color == ColorMode::Auto && OS.has_colors());
    OS.enable_colors(Colors);
    printText(Diags, Sources, OS);
    OS.enable_colors(false);
    break;
  }
  case LintFormat::Json:
    printJson(Diags, Result, Sources, OS);
    break;
  case LintFormat::Sarif:
    printSarif(Diags, Result, Sources, OS);
    break;
  case LintFormat::Rdjson:
    printRdjson(Diags, Result, Sources, OS);
    break;
  }
  OS.flush();

  if (!LintOpts.ExportFixes.empty() || LintOpts.Fix) {
    EditSet Edits;
    if (llvm::Error Err = collectEdits(Diags, Edits)) {
      llvm::errs() << "ddpify: error: " << toString(std::move(Err)) << "\n";
      return ExitError;
    }
    std::optional<PendingFile> Export;
    if (!LintOpts.ExportFixes.empty())
      if (int Status =
              exportFixes(Options, LintOpts, Diags, Edits,
                          Options.Sources.empty()
                              ? llvm::StringRef(Result.Units.front())
                              : llvm::StringRef(Options.Sources.front()),
                          Export))
        return Status;
    if (LintOpts.Fix && !Edits.empty()) {
      // The same writing path as `migrate --in-place`.
      ToolOptions FixOptions = Options;
      FixOptions.InPlace = true;
      FixOptions.OutDir.clear();
      PipelineResult Fixed;
      Fixed.Root = Result.Root;
      Fixed.Edits = std::move(Edits);
      Fixed.Edits.setFormatStyle(Options.FormatStyle);
      if (int Status = writeMigration(FixOptions, Fixed)) {
        if (Export)
          discard(*Export);
        return Status;
      }
    }
    if (Export)
      if (llvm::Error Err = commit(*Export)) {
        llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err))
                     << "\n";
        return ExitError;
      }
  }

  unsigned Warnings = Diags.size() - Errors;
  if (!Options.Quiet) {
    llvm::errs() << "ddpify: " << Warnings << " warning"
                 << (Warnings == 1 ? "" : "s");
    if (Errors)
      llvm::errs() << ", " << Errors << " error" << (Errors == 1 ? "" : "s")
                   << " (warnings treated as errors)";
    if (Folded)
      llvm::errs() << " (" << Folded << " of them folded: what 'ddpify "
                   << "migrate' rewrites; --show-migration lists them)";
    if (Suppressed)
      llvm::errs() << ", " << Suppressed << " suppressed by NOLINT";
    llvm::errs() << "\n";
  }
  if (Errors)
    return ExitFindings;
  return Diags.empty() || LintOpts.ExitZero ? ExitOk : ExitFindings;
}

} // namespace ddpify
