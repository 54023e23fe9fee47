//===- Output.cpp - files, diffs and diagnostics --------------------------===//

#include "Output.h"
#include "Lint.h"
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

/// Writes Content to Path through a temporary file in the same folder, so a
/// failure never leaves a half-written file. Returns the temporary's path.
llvm::Expected<std::string> writeTemporary(llvm::StringRef Path,
                                           llvm::StringRef Content) {
  llvm::SmallString<256> Model(llvm::sys::path::parent_path(Path));
  llvm::sys::path::append(Model, "." + llvm::sys::path::filename(Path) +
                                     ".ddpify-%%%%%%.tmp");
  int FD;
  llvm::SmallString<256> Temporary;
  if (std::error_code EC =
          llvm::sys::fs::createUniqueFile(Model, FD, Temporary))
    return llvm::createStringError(EC, "cannot write '%s': %s",
                                   Path.str().c_str(), EC.message().c_str());
  llvm::raw_fd_ostream Out(FD, /*shouldClose=*/true);
  Out << Content;
  Out.close();
  if (Out.has_error()) {
    std::error_code EC = Out.error();
    Out.clear_error();
    llvm::sys::fs::remove(Temporary);
    return llvm::createStringError(EC, "cannot write '%s': %s",
                                   Path.str().c_str(), EC.message().c_str());
  }
  // Keep the original file's permissions (an executable script stays one).
  if (auto Perms = llvm::sys::fs::getPermissions(Path))
    llvm::sys::fs::setPermissions(Temporary, *Perms);
  return Temporary.str().str();
}

struct PendingWrite {
  std::string Destination;
  std::string Temporary;
};

void discard(std::vector<PendingWrite> &Writes) {
  for (const PendingWrite &Write : Writes)
    llvm::sys::fs::remove(Write.Temporary);
  Writes.clear();
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

} // namespace

std::string unifiedDiff(llvm::StringRef RelativePath, llvm::StringRef Old,
                        llvm::StringRef New) {
  if (Old == New)
    return "";
  std::vector<llvm::StringRef> OldLines = splitLines(Old);
  std::vector<llvm::StringRef> NewLines = splitLines(New);
  // Edits are few and local: one changed block between the common prefix
  // and suffix, refined by pairing equal lines greedily inside it.
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
  enum Op { Keep, Remove, Add };
  std::vector<Op> Script;
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
        Script.push_back(Keep), ++I, ++J;
      } else if (I < OldMid &&
                 (J == NewMid || Lcs[I + 1][J] >= Lcs[I][J + 1])) {
        Script.push_back(Remove), ++I;
      } else {
        Script.push_back(Add), ++J;
      }
    }
  } else {
    Script.assign(OldMid, Remove);
    Script.insert(Script.end(), NewMid, Add);
  }
  std::vector<Op> Full(Prefix, Keep);
  Full.insert(Full.end(), Script.begin(), Script.end());
  Full.insert(Full.end(), Suffix, Keep);

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
  std::vector<PendingWrite> Writes;
  std::vector<std::pair<std::string, std::string>> Copies;
  ProjectTree Tree;
  std::string OutDir;
  auto mirrored = [&](llvm::StringRef Path) {
    llvm::SmallString<256> Destination(OutDir);
    llvm::sys::path::append(Destination, relativeToRoot(Path, Result.Root));
    return Destination.str().str();
  };
  if (!Options.OutDir.empty()) {
    if (std::error_code EC =
            llvm::sys::fs::create_directories(Options.OutDir)) {
      llvm::errs() << "ddpify: error: cannot create '" << Options.OutDir
                   << "': " << EC.message() << "\n";
      return ExitError;
    }
    llvm::SmallString<256> Real;
    llvm::sys::fs::real_path(Options.OutDir, Real);
    OutDir = Real.str().str();
    if (OutDir == Result.Root) {
      llvm::errs() << "ddpify: error: --out-dir is the project root; use "
                      "--in-place\n";
      return ExitError;
    }
    if (std::error_code EC = listProjectTree(Result.Root, OutDir, Tree)) {
      llvm::errs() << "ddpify: error: cannot list '" << Result.Root
                   << "': " << EC.message() << "\n";
      return ExitError;
    }
    for (const std::string &File : Tree.Files)
      Copies.emplace_back(File, mirrored(File));
  }

  // First every changed file goes to a temporary beside its destination;
  // only when all of them are written are they renamed into place.
  for (const auto &[File, Edits] : Result.Edits.files()) {
    std::string Destination = File;
    if (!OutDir.empty()) {
      llvm::SmallString<256> Path(OutDir);
      llvm::sys::path::append(Path, relativeToRoot(File, Result.Root));
      Destination = Path.str().str();
      llvm::sys::fs::create_directories(llvm::sys::path::parent_path(Path));
    } else if (std::error_code EC = llvm::sys::fs::access(
                   File, llvm::sys::fs::AccessMode::Write)) {
      llvm::errs() << "ddpify: error: cannot write '" << File
                   << "': " << EC.message() << "; nothing written\n";
      discard(Writes);
      return ExitError;
    }
    llvm::Expected<std::string> Content = Result.Edits.apply(File);
    llvm::Expected<std::string> Temporary =
        Content ? writeTemporary(Destination, *Content)
                : llvm::Expected<std::string>(Content.takeError());
    if (!Temporary) {
      llvm::errs() << "ddpify: error: " << llvm::toString(Temporary.takeError())
                   << "; nothing written\n";
      discard(Writes);
      return ExitError;
    }
    Writes.push_back({Destination, *Temporary});
  }

  for (const std::string &Folder : Tree.Folders)
    if (std::error_code EC =
            llvm::sys::fs::create_directories(mirrored(Folder))) {
      llvm::errs() << "ddpify: error: cannot create '" << mirrored(Folder)
                   << "': " << EC.message() << "\n";
      discard(Writes);
      return ExitError;
    }
  for (const std::string &Link : Tree.Links) {
    llvm::Expected<std::string> Target = readLink(Link);
    std::error_code EC;
    if (!Target)
      EC = llvm::errorToErrorCode(Target.takeError());
    else {
      // A link left by an earlier run is replaced, as files are.
      llvm::sys::fs::file_status Status;
      if (!llvm::sys::fs::status(mirrored(Link), Status, /*Follow=*/false) &&
          Status.type() == llvm::sys::fs::file_type::symlink_file)
        llvm::sys::fs::remove(mirrored(Link));
      EC = llvm::sys::fs::create_link(*Target, mirrored(Link));
    }
    if (EC) {
      llvm::errs() << "ddpify: error: cannot write '" << mirrored(Link)
                   << "': " << EC.message() << "\n";
      discard(Writes);
      return ExitError;
    }
  }
  for (const auto &[From, To] : Copies) {
    if (Result.Edits.files().count(From))
      continue;
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(To));
    if (std::error_code EC = llvm::sys::fs::copy_file(From, To)) {
      llvm::errs() << "ddpify: error: cannot write '" << To
                   << "': " << EC.message() << "\n";
      discard(Writes);
      return ExitError;
    }
    if (auto Perms = llvm::sys::fs::getPermissions(From))
      llvm::sys::fs::setPermissions(To, *Perms);
  }
  for (size_t I = 0; I < Writes.size(); ++I)
    if (std::error_code EC =
            llvm::sys::fs::rename(Writes[I].Temporary, Writes[I].Destination)) {
      llvm::errs() << "ddpify: error: cannot write '" << Writes[I].Destination
                   << "': " << EC.message() << "\n";
      std::vector<PendingWrite> Rest(Writes.begin() + I, Writes.end());
      discard(Rest);
      return ExitError;
    }
  if (!Options.Quiet)
    for (const PendingWrite &Write : Writes)
      llvm::errs() << "ddpify: wrote " << Write.Destination << "\n";
  return ExitOk;
}

int printDiff(const PipelineResult &Result, llvm::raw_ostream &OS) {
  bool Changed = false;
  for (const auto &[File, Edits] : Result.Edits.files()) {
    llvm::Expected<std::string> Old = readFile(File);
    llvm::Expected<std::string> New = Result.Edits.apply(File);
    if (!Old || !New) {
      llvm::Error Err = Old ? New.takeError() : Old.takeError();
      if (!Old && !New)
        llvm::consumeError(New.takeError());
      llvm::errs() << "ddpify: error: " << llvm::toString(std::move(Err))
                   << "\n";
      return ExitError;
    }
    std::string Diff =
        unifiedDiff(relativeToRoot(File, Result.Root), *Old, *New);
    Changed |= !Diff.empty();
    OS << Diff;
  }
  return Changed ? ExitFindings : ExitOk;
}

llvm::Expected<std::string> writeTemporaryBeside(llvm::StringRef Path,
                                                 llvm::StringRef Content) {
  return writeTemporary(Path, Content);
}

} // namespace ddpify
