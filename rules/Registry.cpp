//===- Registry.cpp - The registered rule units and their table -----------===//

#include "ddpify/Registry.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <iterator>

namespace ddpify {

// Each unit's RuleUnit, defined in its file.
#define DDPIFY_RULE_UNIT(Name) extern const RuleUnit Name;
#include "Rules.def"

namespace {

const RuleUnit *const Units[] = {
#define DDPIFY_RULE_UNIT(Name) &Name,
#include "Rules.def"
};

/// The rules that edit whole files rather than code the AST shows; the tool
/// applies them after every unit's edits (tool/Report.cpp).
const RuleInfo FileRules[] = {
    {"R9", "", "#include <ddp/ddp.h> added once to each changed file"},
    {"R10", "",
     "CMakeLists.txt: find_package(ddpify REQUIRED) and ddpify::runtime "
     "linked to targets whose sources changed"},
};

/// A row's place in the design's table: migration rules by number, then
/// lint-only checks.
unsigned designOrder(const RuleInfo &Rule) {
  unsigned Number = 0;
  if (Rule.RuleId.empty() || Rule.RuleId.drop_front(1).getAsInteger(10, Number))
    return ~0u;
  return Number;
}

} // namespace

llvm::ArrayRef<RuleInfo> allRules() {
  static const std::vector<RuleInfo> Rules = [] {
    std::vector<RuleInfo> Rows;
    for (const RuleUnit *Unit : Units)
      Rows.insert(Rows.end(), Unit->Rows.begin(), Unit->Rows.end());
    Rows.insert(Rows.end(), std::begin(FileRules), std::end(FileRules));
    std::stable_sort(Rows.begin(), Rows.end(),
                     [](const RuleInfo &A, const RuleInfo &B) {
                       return designOrder(A) < designOrder(B);
                     });
    return Rows;
  }();
  return Rules;
}

const RuleInfo *findRule(llvm::StringRef Name) {
  for (const RuleInfo &Rule : allRules())
    if ((!Rule.RuleId.empty() && Rule.RuleId == Name) ||
        (!Rule.CheckName.empty() && Rule.CheckName == Name))
      return &Rule;
  return nullptr;
}

CheckLevel checkLevel(llvm::StringRef CheckName) {
  for (const RuleInfo &Rule : allRules())
    if (!CheckName.empty() && Rule.CheckName == CheckName)
      return Rule.Level;
  return CheckLevel::Hazard;
}

namespace {

bool namesUnit(const RuleUnit &Unit, llvm::ArrayRef<std::string> Names) {
  return llvm::any_of(Unit.Rows, [&](const RuleInfo &Row) {
    return llvm::is_contained(Names, Row.RuleId);
  });
}

} // namespace

bool isOptInRule(llvm::StringRef RuleId) {
  return llvm::any_of(Units, [&](const RuleUnit *Unit) {
    return Unit->OptIn && namesUnit(*Unit, {RuleId.str()});
  });
}

std::vector<std::unique_ptr<MatcherModule>>
createMatcherModules(FindingList &Findings, llvm::StringRef ProjectRoot,
                     llvm::ArrayRef<std::string> OptedIn) {
  std::vector<std::unique_ptr<MatcherModule>> Modules;
  for (const RuleUnit *Unit : Units)
    if (Unit->Create && (!Unit->OptIn || namesUnit(*Unit, OptedIn)))
      Modules.push_back(Unit->Create(Findings, ProjectRoot));
  return Modules;
}

} // namespace ddpify
