//===- PlacementAnalysis.h - Where each tensor was placed -------*- C++ -*-===//
//
// The placement analysis (PlacementAnalysis.cpp) runs over every function of
// the program's own code and tells an observer what it finds: two operands
// whose placements differ for certain, and tensor factories called without
// a device. Each lint check built on it is a rule unit that observes it
// (rules/DeviceMismatchCheck.cpp, rules/CpuFactoryInForwardCheck.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_PLACEMENTANALYSIS_H
#define DDPIFY_PLACEMENTANALYSIS_H

#include "ddpify/MatcherUtil.h"
#include "ddpify/PlacementLattice.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ddpify {

/// A range of the source and what lint says about it.
using PlacementNote = std::pair<clang::SourceRange, std::string>;

/// What the analysis reports, each once per analysed context, in its last
/// pass over the fixed point.
class PlacementObserver {
public:
  virtual ~PlacementObserver() = default;
  /// A new translation unit starts.
  virtual void startTranslationUnit() {}
  /// An operation at At combines placements that differ for certain; the
  /// message names the operands and their devices, the notes say where each
  /// got its placement.
  virtual void mismatch(clang::ASTContext &Context, clang::SourceRange At,
                        std::string Message, std::vector<PlacementNote> Notes) {
  }
  /// Call, a tensor factory of LibTorch (Callee) in function In, creates a
  /// tensor without a device option (argument OptionsArg holds its options)
  /// and is not moved at once by `.to(...)` or `.cuda()`.
  virtual void factoryWithoutDevice(clang::ASTContext &Context,
                                    const clang::CallExpr *Call,
                                    const clang::FunctionDecl *Callee,
                                    const clang::FunctionDecl *In,
                                    unsigned OptionsArg) {}
};

/// `at::Tensor`, through references and cv-qualifiers.
bool isTensorType(clang::QualType Type);
/// A class deriving from torch::nn::Module.
bool isModuleClass(const clang::CXXRecordDecl *Record);

/// The analysis of one run: it matches every function definition and lambda
/// and analyses each once (calls into the program's own functions are
/// followed three deep, per distinct context), reporting to Observer.
class PlacementAnalysis
    : public clang::ast_matchers::MatchFinder::MatchCallback {
public:
  explicit PlacementAnalysis(PlacementObserver &Observer)
      : Observer(Observer) {}

  void registerMatchers(clang::ast_matchers::MatchFinder &Finder);
  void onStartOfTranslationUnit() override;
  void
  run(const clang::ast_matchers::MatchFinder::MatchResult &Result) override;

  /// Analyses Function once (reporting what it finds) and returns the
  /// placement of its returned tensor; unknown while it is being analysed
  /// (recursion) and for functions that are not the user's.
  placement::Place summaryOf(clang::ASTContext &Context,
                             const clang::FunctionDecl *Function);
  /// Analyses Function as called with Params (the placements of some of its
  /// parameters at a call) and returns its returned tensor's placement; once
  /// per distinct context quietly, and once more reporting what it finds
  /// when Report (the caller's last pass) asks.
  placement::Place summaryAt(clang::ASTContext &Context,
                             const clang::FunctionDecl *Function,
                             const placement::Env &Params, bool Report);

  PlacementObserver &observer() { return Observer; }

private:
  bool isAnalysable(clang::ASTContext &Context,
                    const clang::FunctionDecl *Function);

  PlacementObserver &Observer;
  llvm::DenseMap<const clang::FunctionDecl *, placement::Place> Summaries;
  std::map<std::string, placement::Place> ContextSummaries;
  std::set<std::string> ReportedContexts;
  llvm::DenseSet<const clang::FunctionDecl *> InProgress;
};

/// What a lint check built on the analysis holds: its findings, the analysis
/// it observes, and the spots it reported.
class PlacementCheck : public PlacementObserver {
public:
  PlacementCheck(FindingList &Findings, llvm::StringRef ProjectRoot,
                 llvm::StringRef CheckName)
      : Findings(Findings), Locator(ProjectRoot), Check(CheckName) {}

  void startTranslationUnit() override {
    Reported.clear();
    Locator.reset();
  }

protected:
  /// The check's finding at At; its FilePath is empty when the spot is not
  /// the user's or was reported already (a function analysed in several
  /// contexts reports a spot once).
  Finding newFinding(clang::ASTContext &Context, clang::SourceRange At) {
    Finding F = Locator.make(Context, At, "", Check);
    if (!F.FilePath.empty() && !Reported.insert({F.FilePath, F.Offset}).second)
      F.FilePath.clear();
    return F;
  }

  FindingList &Findings;
  FindingLocator Locator;
  PlacementAnalysis Analysis{*this};

private:
  llvm::StringRef Check;
  std::set<std::pair<std::string, unsigned>> Reported;
};

} // namespace ddpify

#endif // DDPIFY_PLACEMENTANALYSIS_H
