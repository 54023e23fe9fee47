//===- EditSet.h - Edits merged per file across translation units -*- C++ -*-=//

#ifndef DDPIFY_EDITSET_H
#define DDPIFY_EDITSET_H

#include "ddpify/Finding.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/Support/Error.h"
#include <map>
#include <optional>
#include <string>

namespace ddpify {

/// The default format style: see applyFormattingOverflow.
inline constexpr const char *OverflowFormatStyle = "overflow";

/// Code with Edits applied, and the statements an edit pushed past the
/// column limit (a line that was within it and now is not) or out of
/// alignment (text the next lines may be aligned to, moved sideways)
/// formatted with clang-format: in the nearest .clang-format's style, else
/// in LLVM's at the file's own width (80 columns, or its longest line) and
/// indentation step. Other lines, and report comments, stay as the edits
/// write them.
llvm::Expected<std::string>
applyFormattingOverflow(llvm::StringRef File, llvm::StringRef Code,
                        const clang::tooling::Replacements &Edits);

/// The width File's lines may have, as applyFormattingOverflow sees it:
/// its .clang-format's column limit, else 80 or its longest line of code;
/// 0 when there is none (a file indented with tabs, formatting disabled).
unsigned columnLimitOf(llvm::StringRef File, llvm::StringRef Code);

/// All edits of a run, per file. A header included by several translation
/// units yields the same edit several times: it is kept once. Two different
/// edits of the same bytes are an error, except insertions at one offset by
/// two different rules (a report comment, a declaration and a guard before
/// one statement): they are joined, whole lines first, the guard last.
class EditSet {
public:
  /// Rule names where the edit comes from (e.g. "R7"); empty for edits that
  /// must never share their offset.
  llvm::Error add(const clang::tooling::Replacement &Edit,
                  llvm::StringRef Rule = "");

  /// Declares that an edit at InsertedAt (an insertion, in File) holds a
  /// verbatim copy of the bytes [Offset, Offset + Length), whose place
  /// becomes Replacement: a value moved before a guard (`auto v = f(x);`,
  /// then `v` where `f(x)` was). An edit of another rule inside those
  /// bytes then goes into the copy, where the code now is: nested edits
  /// compose. Declare every move before adding edits.
  void addMove(llvm::StringRef File, unsigned InsertedAt, unsigned Offset,
               unsigned Length, llvm::StringRef Replacement);

  /// Applies the edits carried into moved copies (addMove); call once, after
  /// the last add().
  llvm::Error composeMoves();

  /// R9: adds `#include <ddp/ddp.h>` to every file that has edits (and does
  /// not include it yet). Reads each file from disk.
  llvm::Error addRuntimeIncludes();

  /// The new contents of File (read from disk) with its edits applied; in
  /// a C or C++ file, the lines they touch are then formatted in the
  /// clang-format style set by setFormatStyle().
  llvm::Expected<std::string> apply(llvm::StringRef File) const;

  /// A clang-format style ("overflow", the default: only the statements an
  /// edit pushes past the column limit or out of alignment, see
  /// applyFormattingOverflow; "none": no formatting; "file": the nearest
  /// .clang-format above each file, none when there is none; "llvm",
  /// "google", ...; or "{key: value, ...}"), as clang-tidy's --format-style.
  void setFormatStyle(std::string Style) { FormatStyle = std::move(Style); }

  const std::map<std::string, clang::tooling::Replacements> &files() const {
    return PerFile;
  }
  bool empty() const { return PerFile.empty(); }
  /// How many files addRuntimeIncludes() added the include to.
  unsigned includesAdded() const { return IncludesAdded; }

private:
  std::map<std::string, clang::tooling::Replacements> PerFile;
  /// The insertions at each file offset, by rule, in the order they are
  /// joined.
  struct Insertion {
    std::string Rule;
    std::string Text;
  };
  std::map<std::pair<std::string, unsigned>, std::vector<Insertion>> Insertions;
  struct Move {
    std::string File;
    unsigned InsertedAt = 0, Offset = 0, Length = 0;
    std::string Replacement;
    /// Edits of other rules inside [Offset, Offset + Length).
    std::vector<clang::tooling::Replacement> Carried;
  };
  std::vector<Move> Moves;
  unsigned IncludesAdded = 0;
  std::string FormatStyle = OverflowFormatStyle;
};

/// The clang-format style Style means for File (see setFormatStyle), or why
/// it has none (an unknown name, a .clang-format that does not parse).
llvm::Error checkFormatStyle(llvm::StringRef Style, llvm::StringRef File);

/// Whether F's edits are applied: not for a finding that is only reported
/// (inside a macro expansion, with a NotRewrittenReason) or has no location.
bool isRewritten(const Finding &F);

/// The edits F's rule computed, as replacements (none unless
/// isRewritten(F)).
std::vector<clang::tooling::Replacement> editsFor(const Finding &F);

/// editsFor(F) as one replacement (what lint shows and exports as the
/// fix-it): several edits become one spanning them, the text between kept
/// (read from F.FilePath); std::nullopt when there is none.
std::optional<clang::tooling::Replacement> editFor(const Finding &F);

/// Reads a whole file.
llvm::Expected<std::string> readFile(llvm::StringRef Path);

} // namespace ddpify

#endif // DDPIFY_EDITSET_H
