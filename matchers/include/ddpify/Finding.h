//===- Finding.h - What a matcher found, where, with which names -*- C++
//-*-===//
//
// A Finding is the only thing matchers hand to the rest of the pipeline: the
// rewriters turn it into an edit, lint prints it as a diagnostic, and the
// report lists the ones that cannot be rewritten safely.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FINDING_H
#define DDPIFY_FINDING_H

#include <string>
#include <vector>

namespace ddpify {

/// The shape of the code a Finding covers; it tells the rewriter which text
/// replaces the range.
enum class FindingForm {
  /// An expression (or a constructor's argument list) that chooses a CUDA
  /// device; replaced by `ddp::device()`.
  CudaDeviceChoice,
  /// `x.cuda()`: the range covers `cuda()`, replaced by `to(<device>)`.
  CudaMemberCall,
  /// The device argument of `x.to(...)` / `model->to(...)`; replaced by
  /// `<device>`.
  CudaToArgument,
  /// R1: the insertion point right after the `{` of main's body; becomes
  /// `ddp::init(argc, argv);` with main's own parameter names, or
  /// `ddp::init()` when ArgvName is empty. With HasSecondRange,
  /// SecondOffset/SecondLength cover main's empty parameter list (or its
  /// `void`), which becomes `int argc, char** argv`.
  EntryInit,
  /// R7/R8: a statement run on every rank, to run on the main process only;
  /// the rule computed its edits itself (Finding::Edits): the guard, the
  /// block it opens for a group of statements, the values computed on every
  /// rank before it.
  GuardStatement,
  /// R8: the path of a file opened for writing; the rule's edits wrap it in
  /// `ddp::output_path(...)` (Finding::Edits).
  OutputPath,
  /// Any other spot whose rule spells its edits itself (Finding::Edits).
  OwnEdits,
  /// R5: the written name of a BatchNorm{1,2,3}d type (qualifier included);
  /// replaced by NewName.
  BatchNormType,
  /// R4: the written callee `torch::data::make_data_loader` of a loader
  /// construction (qualifier included, template arguments excluded);
  /// replaced by NewName (`ddp::make_data_loader` or
  /// `ddp::make_eval_data_loader`).
  DataLoaderCall,
  /// R4: a written `torch::data::StatelessDataLoader` (qualifier included,
  /// template arguments excluded) in the type of something that holds the
  /// loader (a variable, parameter, member, return type or alias); replaced
  /// by NewName (`ddp::DistributedDataLoader`, same template arguments).
  DataLoaderType,
  /// R6: Offset (Length 0) is where the wrap statement goes, right after the
  /// model's placement; Names holds what the rewriter needs to spell it.
  ModelWrap,
  /// R11: Offset (Length 0) is right after a validation loop; Names holds the
  /// accumulators to all-reduce there.
  MetricReduce,
  /// Only reported (ReportId, NotRewrittenReason), never edited; migrate
  /// marks the spot with a `// ddpify: <id>: <reason>` comment.
  ReportOnly,
  /// A lint-only finding (a check with no migration rule); its fix-it, if
  /// any, comes from the rewriter of its check.
  LintOnly,
  /// R10: an edit of a CMakeLists.txt, already made (FilePath, Line); only
  /// counted in the report.
  BuildFileEdit,
  /// What a translation unit shows of the whole program, in NewName:
  /// "main" (it defines main) or "trains" (it builds or steps an optimizer,
  /// or calls code ddpify does not see). No location, no edit: a program
  /// with a main and nothing that trains is left as it is.
  ProgramFact,
};

/// A secondary location of a diagnostic (lint prints it as a note), e.g.
/// where an operand of a device mismatch got its placement.
struct FindingNote {
  std::string FilePath;
  unsigned Offset = 0;
  unsigned Line = 0;
  unsigned Column = 0;
  std::string Message;
};

/// A text edit a rule computed itself, as clang's Transformer rules do: the
/// rewriter applies it as it is.
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
  FindingForm Form = FindingForm::CudaDeviceChoice;
  std::string FilePath; ///< Absolute path of the file holding the range.
  unsigned Offset = 0;  ///< Byte offset of the range in FilePath.
  unsigned Length = 0;
  unsigned Line = 0; ///< 1-based position of Offset, for diagnostics.
  unsigned Column = 0;
  std::string Message;
  /// The expression naming the process's device at this point: a
  /// torch::Device variable in scope (possibly `*ptr`), or empty when none is
  /// visible and the rewriter must use `ddp::device()`.
  std::string DeviceExpr;
  /// R1: the names of main's parameters passed to ddp::init; both empty when
  /// main's parameters cannot be passed (ddp::init() then takes none).
  std::string ArgcName, ArgvName;
  /// R1: the indentation of main's first statement when it starts a line (the
  /// call goes on a line of its own), else empty (`{ ddp::init(...); ...`).
  std::string Indent;
  bool OwnLine = false;
  /// A second range the edit touches (see FindingForm).
  bool HasSecondRange = false;
  unsigned SecondOffset = 0;
  unsigned SecondLength = 0;
  /// R5: the type name the range becomes, e.g. "ddp::SyncBatchNorm2d".
  std::string NewName;
  /// Set when the spot cannot be migrated safely: why (the report lists it;
  /// no edit is made), e.g. a typeid check on a BatchNorm type.
  std::string NotRewrittenReason;
  /// The stable id of a report item (docs/report.md), e.g. "divergent-exit";
  /// set with NotRewrittenReason. Migrate and diff list it in the report.
  std::string ReportId;
  ReportLevel Level = ReportLevel::Warning;
  /// What a rule's rewriter needs to spell its edit (R6: the model
  /// expression and the wrapper's name; R11: the accumulators; ...).
  std::vector<std::string> Names;
  /// The edits of a rule that spells them itself (in FilePath); when set, the
  /// rewriters apply these and nothing else.
  std::vector<FindingEdit> Edits;
  /// Notes lint prints after the warning.
  std::vector<FindingNote> Notes;
  /// Whole-program facts, for edits one unit cannot decide alone: a finding
  /// is kept only when, for each key it Requires, some finding of the run
  /// Provides that key and none provides "!" + key, and no finding provides
  /// a key it Excludes (e.g. every loader of a type becomes ddp's, so each
  /// spelling of that type in any unit is respelled).
  std::string Provides;
  std::vector<std::string> Requires;
  std::vector<std::string> Excludes;
  /// Set when the range comes from a macro expansion: such code is reported,
  /// never rewritten.
  bool InMacro = false;
  std::string MacroName;

  bool operator<(const Finding &Other) const {
    if (FilePath != Other.FilePath)
      return FilePath < Other.FilePath;
    if (Offset != Other.Offset)
      return Offset < Other.Offset;
    return RuleId < Other.RuleId;
  }
  /// The same finding, seen again through another translation unit. A
  /// different DeviceExpr at the same spot is not: it is a conflict.
  bool sameSpot(const Finding &Other) const {
    return FilePath == Other.FilePath && Offset == Other.Offset &&
           Length == Other.Length && RuleId == Other.RuleId &&
           Form == Other.Form && DeviceExpr == Other.DeviceExpr &&
           NewName == Other.NewName;
  }
};

/// Matchers append here; one sink per run, shared by every translation unit.
using FindingList = std::vector<Finding>;

} // namespace ddpify

#endif // DDPIFY_FINDING_H
