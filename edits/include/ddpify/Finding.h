//===- Finding.h - What a rule found, where, and its edits -------*- C++
//-*-===//
//
// A Finding is the only thing rules hand to the rest of the pipeline: the
// edit set applies its edits, lint prints it as a diagnostic (its edits as
// the fix-it), and the report lists the ones that cannot be rewritten
// safely. Nothing in it is specific to one rule.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FINDING_H
#define DDPIFY_FINDING_H

#include <algorithm>
#include <string>
#include <vector>

namespace ddpify {

/// A secondary location of a diagnostic (lint prints it as a note), e.g.
/// where an operand of a device mismatch got its placement.
struct FindingNote {
  std::string FilePath;
  unsigned Offset = 0;
  unsigned Line = 0;
  unsigned Column = 0;
  std::string Message;
};

/// A text edit a rule computed where it matched, as clang's Transformer
/// rules do; the edit set applies it as it is.
struct FindingEdit {
  unsigned Offset = 0;
  unsigned Length = 0;
  std::string Text;
  /// Moves, for an insertion whose Text holds a verbatim copy of the bytes
  /// [Offset, Offset + Length) of each, whose place another edit of the
  /// finding gives the Replacement: another rule's edit inside them goes
  /// into the copy (EditSet::addMove).
  struct Moved {
    unsigned Offset = 0, Length = 0;
    std::string Replacement;
  };
  std::vector<Moved> Moves;
};

/// How bad a report item is. An error is a spot that leaves the migrated
/// program wrong (ranks training alone, diverging, hanging) and that ddpify
/// could not fix: migrate and diff exit 3 when one is listed.
enum class ReportLevel { Warning, Error };

struct Finding {
  std::string RuleId;    ///< Migration rule, e.g. "R3".
  std::string CheckName; ///< Lint check, e.g. "ddp-cuda-call".
  std::string FilePath;  ///< Absolute path of the file holding the range.
  unsigned Offset = 0;   ///< Byte offset of the range in FilePath.
  unsigned Length = 0;
  unsigned Line = 0; ///< 1-based position of Offset, for diagnostics.
  unsigned Column = 0;
  std::string Message;
  /// Set when the spot cannot be migrated safely: why (the report lists it;
  /// no edit is made), e.g. a typeid check on a BatchNorm type.
  std::string NotRewrittenReason;
  /// The stable id of a report item (docs/report.md), e.g. "divergent-exit";
  /// set with NotRewrittenReason. Migrate and diff list it in the report.
  std::string ReportId;
  ReportLevel Level = ReportLevel::Warning;
  /// The edits the rule computed where it matched (in FilePath), as clang's
  /// Transformer rules do; none for a spot that is only reported or for a
  /// lint check with no fix-it.
  std::vector<FindingEdit> Edits;
  /// Notes lint prints after the warning.
  std::vector<FindingNote> Notes;
  /// Whole-program facts, for edits one unit cannot decide alone: a finding
  /// is kept only when, for each key it Requires, some finding of the run
  /// Provides that key and none provides "!" + key, and no finding provides
  /// a key it Excludes (e.g. every loader of a type becomes ddp's, so each
  /// spelling of that type in any unit is respelled). A finding with no
  /// location that only Provides is a fact: "program:main" (the unit
  /// defines main), "program:trains" (it builds or steps an optimizer, or
  /// calls code ddpify does not see); a program with a main and nothing that
  /// trains is left as it is.
  std::string Provides;
  std::vector<std::string> Requires;
  std::vector<std::string> Excludes;
  /// Set when the range comes from a macro expansion: such code is reported,
  /// never rewritten.
  bool InMacro = false;
  std::string MacroName;

  /// The message a diagnostic shows (lint, the clang-tidy checks): for code
  /// in a macro expansion, with why it has no fix-it.
  std::string diagnosticMessage() const {
    if (!InMacro)
      return Message;
    return Message + " (inside macro" +
           (MacroName.empty() ? "" : " '" + MacroName + "'") +
           "; no automatic fix)";
  }

  /// The edit that replaces the finding's whole range with Text (the only
  /// edit of the finding).
  void replaceRangeWith(std::string Text) {
    Edits = {FindingEdit{Offset, Length, std::move(Text), {}}};
  }

  bool operator<(const Finding &Other) const {
    if (FilePath != Other.FilePath)
      return FilePath < Other.FilePath;
    if (Offset != Other.Offset)
      return Offset < Other.Offset;
    return RuleId < Other.RuleId;
  }
  /// The same finding, seen again through another translation unit. Other
  /// edits of the same spot are not: they are a conflict.
  bool sameSpot(const Finding &Other) const {
    auto SameEdit = [](const FindingEdit &A, const FindingEdit &B) {
      return A.Offset == B.Offset && A.Length == B.Length && A.Text == B.Text;
    };
    return FilePath == Other.FilePath && Offset == Other.Offset &&
           Length == Other.Length && RuleId == Other.RuleId &&
           Provides == Other.Provides &&
           std::equal(Edits.begin(), Edits.end(), Other.Edits.begin(),
                      Other.Edits.end(), SameEdit);
  }
};

/// Matchers append here; one sink per run, shared by every translation unit.
using FindingList = std::vector<Finding>;

/// Drops each finding one of whose Requires no finding of the list Provides
/// (or whose negation, "!" + key, one does), and each finding one of whose
/// Excludes some finding provides.
void dropUnmetRequirements(FindingList &Findings);

/// Sorts the findings and keeps one of each spot seen through several
/// translation units (a header included by several).
void mergeSameSpots(FindingList &Findings);

} // namespace ddpify

#endif // DDPIFY_FINDING_H
