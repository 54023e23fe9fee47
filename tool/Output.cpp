//===- Output.cpp - files, diffs and diagnostics --------------------------===//

#include "Output.h"
#include "CheckGlobs.h"
#include "ddpify/AtomicFile.h"
#include "ddpify/EditSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <cerrno>
#include <unistd.h>

namespace ddpify {
namespace {

std::string relativeToRoot(llvm::StringRef Path, llvm::StringRef Root) {
  llvm::StringRef Rest = Path;
  if (Rest.consume_front(Root))
    Rest = Rest.ltrim('/');
  return Rest.str();
}

/// Lines of Text, each keeping its '\n' (the last one may lack it).
std::vector<llvm::StringRef> splitLines(llvm::StringRef Text) {
  std::vector<llvm::StringRef> Lines;
  while (!Text.empty()) {
    size_t End = Text.find('\n');
    End = End == llvm::StringRef::npos ? Text.size() : End + 1;
    Lines.push_back(Text.take_front(End));
    Text = Text.drop_front(End);
  }
  return Lines;
}

void printDiffLine(llvm::raw_ostream &OS, char Marker, llvm::StringRef Line) {
  OS << Marker << Line;
  if (!Line.ends_with("\n"))
    OS << "\n\\ No newline at end of file\n";
}

bool isBuildTree(llvm::StringRef Dir) {
  llvm::SmallString<256> Cache(Dir);
  llvm::sys::path::append(Cache, "CMakeCache.txt");
  return llvm::sys::fs::exists(Cache);
}

/// What --out-dir mirrors under Root: every folder (empty ones too, so the
/// output is the tree `git apply` of the diff gives), regular file and
/// symbolic link, but not .git, build trees or the output folder itself.
struct ProjectTree {
  std::vector<std::string> Folders;
  std::vector<std::string> Files;
  std::vector<std::string> Links;
};

std::error_code listProjectTree(llvm::StringRef Root, llvm::StringRef OutDir,
                                ProjectTree &Tree) {
  std::error_code EC;
  // Links are not followed: a link is copied as a link, never its target.
  for (llvm::sys::fs::recursive_directory_iterator It(Root, EC,
                                                      /*follow=*/false),
       End;
       It != End && !EC; It.increment(EC)) {
    llvm::StringRef Path = It->path();
    llvm::sys::fs::file_type Type = It->type();
    if (Type == llvm::sys::fs::file_type::directory_file) {
      llvm::SmallString<256> Real;
      llvm::sys::fs::real_path(Path, Real);
      if (llvm::sys::path::filename(Path) == ".git" || Real == OutDir ||
          isBuildTree(Path)) {
        It.no_push();
        continue;
      }
      Tree.Folders.push_back(Path.str());
      continue;
    }
    if (Type == llvm::sys::fs::file_type::regular_file)
      Tree.Files.push_back(Path.str());
    else if (Type == llvm::sys::fs::file_type::symlink_file)
      Tree.Links.push_back(Path.str());
  }
  return EC;
}

/// The target of the symbolic link Path, as written in the link.
llvm::Expected<std::string> readLink(llvm::StringRef Path) {
  llvm::SmallString<256> Target;
  Target.resize_for_overwrite(4096);
  ssize_t Size = ::readlink(Path.str().c_str(), Target.data(), Target.size());
  if (Size < 0)
    return llvm::createStringError(
        std::error_code(errno, std::generic_category()),
        "cannot read the link '%s'", Path.str().c_str());
  return std::string(Target.data(), static_cast<size_t>(Size));
}

/// What becomes of each line: the old line kept, removed, or a new line
/// added.
enum class LineOp { Keep, Remove, Add };

/// The edit script from OldLines to NewLines. Edits are few and local: one
/// changed block between the common prefix and suffix, refined by pairing
/// equal lines greedily inside it.
std::vector<LineOp> editScript(const std::vector<llvm::StringRef> &OldLines,
                               const std::vector<llvm::StringRef> &NewLines) {
  size_t Prefix = 0;
  while (Prefix < OldLines.size() && Prefix < NewLines.size() &&
         OldLines[Prefix] == NewLines[Prefix])
    ++Prefix;
  size_t Suffix = 0;
  while (Suffix + Prefix < OldLines.size() &&
         Suffix + Prefix < NewLines.size() &&
         OldLines[OldLines.size() - 1 - Suffix] ==
             NewLines[NewLines.size() - 1 - Suffix])
    ++Suffix;

  // An edit script over the middle: longest common subsequence of lines,
  // bounded in size (ddpify's edits touch few lines).
  size_t OldMid = OldLines.size() - Prefix - Suffix;
  size_t NewMid = NewLines.size() - Prefix - Suffix;
  std::vector<LineOp> Script;
  if (OldMid * NewMid <= 4000000) {
    std::vector<std::vector<unsigned>> Lcs(
        OldMid + 1, std::vector<unsigned>(NewMid + 1, 0));
    for (size_t I = OldMid; I-- > 0;)
      for (size_t J = NewMid; J-- > 0;)
        Lcs[I][J] = OldLines[Prefix + I] == NewLines[Prefix + J]
                        ? Lcs[I + 1][J + 1] + 1
                        : std::max(Lcs[I + 1][J], Lcs[I][J + 1]);
    size_t I = 0, J = 0;
    while (I < OldMid || J < NewMid) {
      if (I < OldMid && J < NewMid &&
          OldLines[Prefix + I] == NewLines[Prefix + J]) {
        Script.push_back(LineOp::Keep), ++I, ++J;
      } else if (I < OldMid &&
                 (J == NewMid || Lcs[I + 1][J] >= Lcs[I][J + 1])) {
        Script.push_back(LineOp::Remove), ++I;
      } else {
        Script.push_back(LineOp::Add), ++J;
      }
    }
  } else {
    Script.assign(OldMid, LineOp::Remove);
    Script.insert(Script.end(), NewMid, LineOp::Add);
  }
  std::vector<LineOp> Full(Prefix, LineOp::Keep);
  Full.insert(Full.end(), Script.begin(), Script.end());
  Full.insert(Full.end(), Suffix, LineOp::Keep);
  return Full;
}

} // namespace

std::vector<ChangedLines> changedLines(llvm::StringRef Old,
                                       llvm::StringRef New) {
  std::vector<ChangedLines> Blocks;
  if (Old == New)
    return Blocks;
  std::vector<llvm::StringRef> OldLines = splitLines(Old);
  std::vector<llvm::StringRef> NewLines = splitLines(New);
  std::vector<LineOp> Full = editScript(OldLines, NewLines);
  size_t O = 0, N = 0;
  for (size_t K = 0; K < Full.size();) {
    if (Full[K] == LineOp::Keep) {
      ++O, ++N, ++K;
      continue;
    }
    ChangedLines Block{O, O, N, N};
    for (; K < Full.size() && Full[K] != LineOp::Keep; ++K) {
      if (Full[K] == LineOp::Remove)
        ++O;
      else
        ++N;
    }
    Block.OldEnd = O;
    Block.NewEnd = N;
    Blocks.push_back(Block);
  }
  return Blocks;
}

std::string unifiedDiff(llvm::StringRef RelativePath, llvm::StringRef Old,
                        llvm::StringRef New) {
  if (Old == New)
    return "";
  std::vector<llvm::StringRef> OldLines = splitLines(Old);
  std::vector<llvm::StringRef> NewLines = splitLines(New);
  const LineOp Keep = LineOp::Keep, Remove = LineOp::Remove, Add = LineOp::Add;
  std::vector<LineOp> Full = editScript(OldLines, NewLines);

  // Group changes into hunks with 3 lines of context.
  const size_t Context = 3;
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  OS << "--- a/" << RelativePath << "\n+++ b/" << RelativePath << "\n";
  size_t Pos = 0;
  // Old and new line numbers (0-based) of each script position.
  std::vector<size_t> OldAt(Full.size() + 1), NewAt(Full.size() + 1);
  for (size_t K = 0, O = 0, N = 0; K <= Full.size(); ++K) {
    OldAt[K] = O;
    NewAt[K] = N;
    if (K < Full.size()) {
      O += Full[K] != Add;
      N += Full[K] != Remove;
    }
  }
  while (Pos < Full.size()) {
    while (Pos < Full.size() && Full[Pos] == Keep)
      ++Pos;
    if (Pos == Full.size())
      break;
    size_t Begin = Pos >= Context ? Pos - Context : 0;
    size_t End = Pos;
    // Extend while the next change is within 2*Context unchanged lines.
    while (true) {
      while (End < Full.size() && Full[End] != Keep)
        ++End;
      size_t NextChange = End;
      while (NextChange < Full.size() && Full[NextChange] == Keep)
        ++NextChange;
      if (NextChange < Full.size() && NextChange - End <= 2 * Context) {
        End = NextChange;
        continue;
      }
      End = std::min(Full.size(), End + Context);
      break;
    }
    size_t OldCount = OldAt[End] - OldAt[Begin];
    size_t NewCount = NewAt[End] - NewAt[Begin];
    OS << "@@ -" << (OldCount ? OldAt[Begin] + 1 : OldAt[Begin]) << ","
       << OldCount << " +" << (NewCount ? NewAt[Begin] + 1 : NewAt[Begin])
       << "," << NewCount << " @@\n";
    for (size_t K = Begin; K < End; ++K) {
      if (Full[K] == Keep)
        printDiffLine(OS, ' ', OldLines[OldAt[K]]);
      else if (Full[K] == Remove)
        printDiffLine(OS, '-', OldLines[OldAt[K]]);
      else
        printDiffLine(OS, '+', NewLines[NewAt[K]]);
    }
    Pos = End;
  }
  return Text;
}

bool isCheckEnabled(llvm::StringRef Globs, llvm::StringRef CheckName) {
  return matchesGlobList(Globs, CheckName);
}

int writeMigration(const ToolOptions &Options, const PipelineResult &Result) {
  // Every output goes to a temporary beside its destination first; only when
  // all of them are written are they renamed into place.
  std::vector<PendingFile> Changed;
  std::vector<PendingFile> Mirrored;
  // Folders of --out-dir this run made (the folder itself too when it was
  // not there): a failure takes them away again.
  std::vector<std::string> CreatedFolders;
  auto fail = [&](const llvm::Twine &Message) {
    llvm::errs() << "ddpify: error: " << Message << "; nothing written\n";
    discard(Changed);
    discard(Mirrored);
    removeCreatedFolders(CreatedFolders);
    return ExitError;
  };
  auto cannotCreate = [&](llvm::StringRef Folder, std::error_code EC) {
    return fail("cannot create '" + Folder + "': " + EC.message());
  };
  ProjectTree Tree;
  std::string OutDir;
  auto mirrored = [&](llvm::StringRef Path) {
    llvm::SmallString<256> Destination(OutDir);
    llvm::sys::path::append(Destination, relativeToRoot(Path, Result.Root));
    return Destination.str().str();
  };
  if (!Options.OutDir.empty()) {
    if (std::error_code EC = createFolders(Options.OutDir, CreatedFolders))
      return cannotCreate(Options.OutDir, EC);
    llvm::SmallString<256> Real;
    llvm::sys::fs::real_path(Options.OutDir, Real);
    OutDir = Real.str().str();
    if (OutDir == Result.Root)
      return fail("--out-dir is the project root; use --in-place");
    if (std::error_code EC = listProjectTree(Result.Root, OutDir, Tree))
      return fail("cannot list '" + Result.Root + "': " + EC.message());
  }

  for (const auto &[File, Edits] : Result.Edits.files()) {
    std::string Destination = File;
    if (!OutDir.empty()) {
      Destination = mirrored(File);
      llvm::StringRef Parent = llvm::sys::path::parent_path(Destination);
      if (std::error_code EC = createFolders(Parent, CreatedFolders))
        return cannotCreate(Parent, EC);
    } else if (std::error_code EC = llvm::sys::fs::access(
                   File, llvm::sys::fs::AccessMode::Write)) {
      return fail("cannot write '" + File + "': " + EC.message());
    }
    llvm::Expected<std::string> Content = Result.Edits.apply(File);
    llvm::Expected<PendingFile> Pending =
        Content ? writePending(Destination, *Content, /*PermissionsFrom=*/File)
                : llvm::Expected<PendingFile>(Content.takeError());
    if (!Pending)
      return fail(llvm::toString(Pending.takeError()));
    Changed.push_back(std::move(*Pending));
  }

  for (const std::string &Folder : Tree.Folders)
    if (std::error_code EC = createFolders(mirrored(Folder), CreatedFolders))
      return cannotCreate(mirrored(Folder), EC);
  // A link or file left by an earlier run is replaced by the rename.
  for (const std::string &Link : Tree.Links) {
    llvm::Expected<std::string> Target = readLink(Link);
    llvm::Expected<PendingFile> Pending =
        Target ? linkPending(*Target, mirrored(Link))
               : llvm::Expected<PendingFile>(Target.takeError());
    if (!Pending)
      return fail(llvm::toString(Pending.takeError()));
    Mirrored.push_back(std::move(*Pending));
  }
  for (const std::string &File : Tree.Files) {
    if (Result.Edits.files().count(File))
      continue;
    llvm::Expected<PendingFile> Pending = copyPending(File, mirrored(File));
    if (!Pending)
      return fail(llvm::toString(Pending.takeError()));
    Mirrored.push_back(std::move(*Pending));
  }

  std::vector<std::string> Written;
  for (const PendingFile &File : Changed)
    Written.push_back(File.Destination);
  std::vector<PendingFile> All = std::move(Changed);
  All.insert(All.end(), Mirrored.begin(), Mirrored.end());
  if (llvm::Error Err = commitAll(All)) {
    llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err)) << "\n";
    return ExitError;
  }
  if (!Options.Quiet)
    for (const std::string &Destination : Written)
      llvm::errs() << "ddpify: wrote " << Destination << "\n";
  return ExitOk;
}

bool readBeforeAndAfter(const PipelineResult &Result, llvm::StringRef File,
                        std::optional<std::string> &Old,
                        std::optional<std::string> &New) {
  llvm::Expected<std::string> Before = readFile(File);
  llvm::Expected<std::string> After = Result.Edits.apply(File);
  if (!Before || !After) {
    llvm::Error Err = Before ? After.takeError() : Before.takeError();
    if (!Before && !After)
      llvm::consumeError(After.takeError());
    llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err)) << "\n";
    return false;
  }
  Old = std::move(*Before);
  New = std::move(*After);
  return true;
}

int printDiff(const PipelineResult &Result, llvm::raw_ostream &OS) {
  bool Changed = false;
  for (const auto &[File, Edits] : Result.Edits.files()) {
    std::optional<std::string> Old, New;
    if (!readBeforeAndAfter(Result, File, Old, New))
      return ExitError;
    std::string Diff =
        unifiedDiff(relativeToRoot(File, Result.Root), *Old, *New);
    Changed |= !Diff.empty();
    OS << Diff;
  }
  return Changed ? ExitFindings : ExitOk;
}

} // namespace ddpify
