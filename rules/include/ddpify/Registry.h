//===- Registry.h - Rule units and the table they make ----------*- C++ -*-===//
//
// A rule unit (rules/<Name>.cpp) holds a rule's or a lint check's matchers,
// the edits it computes where they match, and its rows of the table that
// drives --help, lint's check selection and SARIF's rule list. It is
// registered by one line in rules/Rules.def (docs/architecture.md).
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

/// Every rule and check, in the order of the design's table: migration rules
/// by number (a check of a rule after the rule), then the lint-only checks.
llvm::ArrayRef<RuleInfo> allRules();

/// The rule whose id or check name is Name, or nullptr.
const RuleInfo *findRule(llvm::StringRef Name);

/// The matchers of one rule unit for one run. It registers them on a
/// MatchFinder and appends Findings, each with the edits it computed.
class MatcherModule {
public:
  virtual ~MatcherModule() = default;
  virtual void registerMatchers(clang::ast_matchers::MatchFinder &Finder) = 0;
};

using MatcherModuleFactory = std::unique_ptr<MatcherModule> (*)(
    FindingList &Findings, llvm::StringRef ProjectRoot);

/// What a rule unit registers: its rows of the table (none for a unit that
/// serves a rule another unit describes) and its matchers. An opt-in unit
/// runs only when the run names its rule (a migrate option, e.g.
/// --shard-optimizer for R14).
struct RuleUnit {
  llvm::ArrayRef<RuleInfo> Rows;
  MatcherModuleFactory Create = nullptr;
  bool OptIn = false;
};

/// Whether Rule's unit is opt-in.
bool isOptInRule(llvm::StringRef RuleId);

/// The factory of a unit whose module is constructed from the run's findings
/// and the project root.
template <typename Module>
std::unique_ptr<MatcherModule> createModule(FindingList &Findings,
                                            llvm::StringRef ProjectRoot) {
  return std::make_unique<Module>(Findings, ProjectRoot);
}

/// Creates the matchers of every registered unit, in the order of
/// Rules.def, each appending to Findings; an opt-in unit only when OptedIn
/// names its rule. ProjectRoot bounds where findings are recorded.
std::vector<std::unique_ptr<MatcherModule>>
createMatcherModules(FindingList &Findings, llvm::StringRef ProjectRoot,
                     llvm::ArrayRef<std::string> OptedIn = {});

} // namespace ddpify

#endif // DDPIFY_REGISTRY_H
