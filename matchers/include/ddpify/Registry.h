//===- Registry.h - The table of rules and lint checks ----------*- C++ -*-===//
//
// One table drives --help, lint check selection and the docs: a new rule adds
// one row here and one matcher module in createMatcherModules().
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_REGISTRY_H
#define DDPIFY_REGISTRY_H

#include "ddpify/Finding.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <memory>
#include <vector>

namespace ddpify {

/// How lint's text output shows a check's findings (JSON and SARIF list every
/// one, with its level).
enum class CheckLevel {
  /// Listed one by one: a crash, a hang or a silently wrong result.
  Hazard,
  /// What `migrate` simply rewrites and is no hazard on its own: folded into
  /// one line per file.
  Rewrite,
  /// Folded like Rewrite while the program is not yet distributed (its main
  /// has no ddp::init: migrate would rewrite it all); a hazard once it is
  /// (every rank on one GPU, reading every sample, writing one file).
  RewriteUntilDistributed,
};

struct RuleInfo {
  llvm::StringRef RuleId;    ///< "R2"
  llvm::StringRef CheckName; ///< "ddp-hardcoded-device"; empty: no lint check.
  llvm::StringRef Summary;   ///< One line for --help.
  CheckLevel Level = CheckLevel::Hazard;
};

/// The level of the lint check named CheckName (Hazard for an unknown name).
CheckLevel checkLevel(llvm::StringRef CheckName);

/// Every rule ddpify applies, in the order of the design's table.
llvm::ArrayRef<RuleInfo> allRules();

/// The rule whose id or check name is Name, or nullptr.
const RuleInfo *findRule(llvm::StringRef Name);

/// A set of matchers for one concern (device, data, model, ...). It registers
/// its matchers on a MatchFinder and appends Findings; it never edits.
class MatcherModule {
public:
  virtual ~MatcherModule() = default;
  virtual void registerMatchers(clang::ast_matchers::MatchFinder &Finder) = 0;
};

/// Creates one instance of every matcher module, each appending to Findings.
/// ProjectRoot bounds where findings are recorded.
std::vector<std::unique_ptr<MatcherModule>>
createMatcherModules(FindingList &Findings, llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_REGISTRY_H
