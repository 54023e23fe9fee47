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

struct RuleInfo {
  llvm::StringRef RuleId;    ///< "R2"
  llvm::StringRef CheckName; ///< "ddp-hardcoded-device"; empty: no lint check.
  llvm::StringRef Summary;   ///< One line for --help.
};

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
