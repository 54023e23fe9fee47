//===- SyncBatchNorm.cpp - R5: BatchNorm becomes SyncBatchNorm ------------===//
//
// R5 finds every written `torch::nn::BatchNorm{1,2,3}d` (the TORCH_MODULE
// holder): member and local types, constructions such as
// `torch::nn::BatchNorm2d(16)` in register_module, Sequential arguments,
// push_back and braced initialisers. The name (with its qualifier) becomes
// `ddp::SyncBatchNorm{1,2,3}d`, whose options type is the same. Left alone:
// `as<torch::nn::BatchNorm2d>()` (SyncBatchNorm's Impl derives from the
// BatchNorm Impl, so the check keeps working), the *Impl and *Options types,
// and `typeid(...)` (an exact type test that the new type would change).
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

/// `typeid(...)`; ASTMatchers has no matcher of its own for it.
const internal::VariadicDynCastAllOfMatcher<Stmt, CXXTypeidExpr>
    cxxTypeidExpr; // NOLINT(readability-identifier-naming)

class SyncBatchNormMatchers : public MatcherModule,
                              public MatchFinder::MatchCallback {
public:
  SyncBatchNormMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(
        typeLoc(loc(qualType(hasDeclaration(cxxRecordDecl(hasAnyName(
                    "::torch::nn::BatchNorm1d", "::torch::nn::BatchNorm2d",
                    "::torch::nn::BatchNorm3d"))))))
            .bind("type"),
        this);
    Finder.addMatcher(cxxTypeidExpr().bind("typeid"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    TUFindings.clear();
  }

  void onEndOfTranslationUnit() override {
    // `torch::nn::BatchNorm2d` is an elaborated type around the record type
    // `BatchNorm2d`: keep the outermost range only, once.
    std::set<std::pair<std::string, unsigned>> Seen;
    for (size_t I = 0; I < TUFindings.size(); ++I) {
      const Finding &F = TUFindings[I];
      bool Nested = false;
      for (size_t J = 0; J < TUFindings.size() && !Nested; ++J) {
        const Finding &Other = TUFindings[J];
        Nested = I != J && !F.InMacro && !Other.InMacro &&
                 Other.FilePath == F.FilePath && Other.Offset <= F.Offset &&
                 F.Offset + F.Length <= Other.Offset + Other.Length &&
                 Other.Length > F.Length;
      }
      if (!Nested && Seen.insert({F.FilePath, F.Offset}).second)
        Findings.push_back(F);
    }
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *Typeid = Result.Nodes.getNodeAs<CXXTypeidExpr>("typeid")) {
      handleTypeid(Typeid);
      return;
    }
    const auto *Type = Result.Nodes.getNodeAs<TypeLoc>("type");
    if (!Type)
      return;
    const CXXRecordDecl *Record =
        Type->getType().getCanonicalType()->getAsCXXRecordDecl();
    if (!Record || isExcluded(*Type))
      return;
    llvm::StringRef Name = Record->getName(); // BatchNorm2d
    std::string NewName = "ddp::Sync" + Name.str();
    Finding F = Locator.make(*Context, Type->getSourceRange(), "R5",
                             "ddp-unsynced-batchnorm");
    if (F.FilePath.empty())
      return;
    F.replaceRangeWith(NewName);
    F.Message = "'torch::nn::" + Name.str() +
                "' computes batch statistics over one process's batch only; "
                "use '" +
                NewName + "' (same options)";
    TUFindings.push_back(std::move(F));
  }

private:
  /// `typeid(x) == typeid(torch::nn::BatchNorm2dImpl)`: an exact type test
  /// that stops matching once the layer is a SyncBatchNorm; reported.
  void handleTypeid(const CXXTypeidExpr *Typeid) {
    if (Typeid->isValueDependent() || Typeid->isTypeDependent())
      return;
    QualType Operand = Typeid->isTypeOperand()
                           ? Typeid->getTypeOperand(*Context)
                           : Typeid->getExprOperand()->getType();
    const CXXRecordDecl *Record =
        Operand.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
    if (!Record)
      return;
    std::string Name = Record->getQualifiedNameAsString();
    llvm::StringRef Short = Name;
    if (!Short.consume_front("torch::nn::BatchNorm") || Short.size() < 2 ||
        !llvm::StringRef("123").contains(Short[0]) || Short[1] != 'd' ||
        !(Short.size() == 2 || Short.drop_front(2) == "Impl"))
      return;
    Finding F = Locator.make(*Context, Typeid->getSourceRange(), "R5",
                             "ddp-unsynced-batchnorm");
    if (F.FilePath.empty())
      return;
    F.NotRewrittenReason =
        "a typeid check on '" + Name +
        "' stops matching once the layer is a "
        "ddp::SyncBatchNorm" +
        Short.take_front(2).str() + "; test with as<torch::nn::BatchNorm" +
        Short.take_front(2).str() + ">() instead, which keeps matching";
    F.Message = F.NotRewrittenReason;
    F.ReportId = "batchnorm-typeid";
    TUFindings.push_back(std::move(F));
  }

  /// `as<BatchNorm2d>()` and `typeid(BatchNorm2d)` keep the original type.
  bool isExcluded(const TypeLoc &Type) {
    DynTypedNode Node = DynTypedNode::create(Type);
    for (int Depth = 0; Depth < 6; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return false;
      Node = Parents[0];
      if (Node.get<CXXTypeidExpr>())
        return true;
      if (const auto *Member = Node.get<MemberExpr>())
        return Member->getMemberDecl()->getName() == "as";
      if (const auto *Dependent = Node.get<CXXDependentScopeMemberExpr>())
        return Dependent->getMember().getAsString() == "as";
      if (Node.get<Stmt>() || Node.get<Decl>())
        return false;
    }
    return false;
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  FindingList TUFindings;
};

const RuleInfo SyncBatchNormRows[] = {
    {"R5", "ddp-unsynced-batchnorm",
     "torch::nn::BatchNorm{1,2,3}d becomes ddp::SyncBatchNorm{1,2,3}d",
     CheckLevel::Rewrite},
};

} // namespace

extern const RuleUnit SyncBatchNorm{SyncBatchNormRows,
                                    createModule<SyncBatchNormMatchers>};

} // namespace ddpify
