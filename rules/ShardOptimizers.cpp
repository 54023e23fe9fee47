//===- ShardOptimizers.cpp - R14: optimizer state sharded (ZeRO-1) --------===//
//
// With `migrate --shard-optimizer` (an opt-in rule), an optimizer of a
// wrapped model built as SGD, Adam, AdamW, RMSprop or Adagrad becomes a
// `ddp::ZeroRedundancyOptimizer<...>` of the same optimizer: each rank keeps
// the state of its share of the parameters. Its type is respelled where it
// is declared (a local or global, `auto x = torch::optim::Adam(...)`, a
// member). Where the respelled type would not compile or would change what
// the program does, the optimizer stays as it is and a report item says
// why: its parameters are not a model's parameters(), it is passed as its
// own class to a function, its state is saved or loaded (saving needs
// consolidate_state_dict on every rank first, docs/runtime-zero.md), or it
// is made by std::make_unique / std::make_shared.
//
//===----------------------------------------------------------------------===//

#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "ddpify/Work.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/DenseMap.h"
#include <map>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Rule = "R14";
constexpr llvm::StringLiteral ReportId = "optimizer-not-sharded";

/// The optimizers ddp::ZeroRedundancyOptimizer wraps: built from parameters
/// and options, their state per parameter.
internal::Matcher<NamedDecl> shardableOptimizer() {
  return hasAnyName("::torch::optim::SGD", "::torch::optim::Adam",
                    "::torch::optim::AdamW", "::torch::optim::RMSprop",
                    "::torch::optim::Adagrad");
}

bool isModuleClass(const CXXRecordDecl *Class) {
  if (!Class || !Class->hasDefinition())
    return false;
  if (Class->getQualifiedNameAsString() == "torch::nn::Module")
    return true;
  for (const CXXBaseSpecifier &Base : Class->bases())
    if (isModuleClass(Base.getType()->getAsCXXRecordDecl()))
      return true;
  return false;
}

/// A `parameters()` of a torch::nn::Module somewhere in S.
class ParametersCallFinder : public RecursiveASTVisitor<ParametersCallFinder> {
public:
  bool Found = false;
  bool VisitCXXMemberCallExpr(CXXMemberCallExpr *Call) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (Method && Method->getIdentifier() &&
        Method->getName() == "parameters" && isModuleClass(Method->getParent()))
      Found = true;
    return !Found;
  }
};

bool takesModelParameters(const Expr *E) {
  ParametersCallFinder Finder;
  Finder.TraverseStmt(const_cast<Expr *>(E));
  return Finder.Found;
}

class ShardOptimizers : public MatcherModule,
                        public MatchFinder::MatchCallback {
public:
  ShardOptimizers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    auto Optimizer = cxxRecordDecl(shardableOptimizer());
    Finder.addMatcher(
        cxxConstructExpr(hasType(Optimizer), argumentCountAtLeast(2))
            .bind("construct"),
        this);
    Finder.addMatcher(declRefExpr(to(varDecl(hasType(Optimizer)))).bind("use"),
                      this);
    Finder.addMatcher(
        memberExpr(member(fieldDecl(hasType(Optimizer)))).bind("use"), this);
    Finder.addMatcher(
        callExpr(callee(functionDecl(
                     hasAnyName("::std::make_unique", "::std::make_shared"),
                     hasTemplateArgument(
                         0, refersToType(hasDeclaration(Optimizer))))))
            .bind("made"),
        this);
  }

  void onStartOfTranslationUnit() override {
    Constructions.clear();
    Unsafe.clear();
    Done.clear();
    Locator.reset();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    if (const auto *Construct =
            Result.Nodes.getNodeAs<CXXConstructExpr>("construct"))
      Constructions.push_back(Construct);
    else if (const auto *Use = Result.Nodes.getNodeAs<Expr>("use"))
      noteUse(Use);
    else if (const auto *Made = Result.Nodes.getNodeAs<CallExpr>("made"))
      report(Made->getSourceRange(),
             "the optimizer is made by std::make_unique or std::make_shared: "
             "ddpify does not follow the pointer to its type; build it as "
             "ddp::ZeroRedundancyOptimizer<...> by hand to shard its state");
  }

  void onEndOfTranslationUnit() override {
    for (const CXXConstructExpr *Construct : Constructions)
      shard(Construct);
    Context = nullptr;
  }

private:
  /// A use of an optimizer variable or member that the respelled type would
  /// break or that ZeRO changes the meaning of.
  void noteUse(const Expr *Use) {
    const ValueDecl *Decl = nullptr;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Use))
      Decl = Ref->getDecl();
    else if (const auto *Member = dyn_cast<MemberExpr>(Use))
      Decl = Member->getMemberDecl();
    if (!Decl)
      return;
    // Up through what keeps the same object: casts, parentheses, `&`.
    const Expr *Outer = Use;
    DynTypedNodeList Parents = Context->getParents(*Outer);
    while (!Parents.empty()) {
      const auto *Parent = Parents[0].get<Expr>();
      if (!Parent || !(isa<ImplicitCastExpr, ParenExpr>(Parent) ||
                       (isa<UnaryOperator>(Parent) &&
                        cast<UnaryOperator>(Parent)->getOpcode() == UO_AddrOf)))
        break;
      Outer = Parent;
      Parents = Context->getParents(*Outer);
    }
    if (Parents.empty())
      return;
    const auto *Class = Decl->getType()->getAsCXXRecordDecl();
    if (const auto *Call = Parents[0].get<CallExpr>()) {
      std::string Callee = qualifiedCalleeName(Call);
      if (Callee == "torch::save" || Callee == "torch::load") {
        Unsafe.emplace(Decl, "its state is saved or loaded with '" + Callee +
                                 "': a sharded optimizer's state is "
                                 "consolidated on every rank first "
                                 "(consolidate_state_dict, "
                                 "docs/runtime-zero.md)");
        return;
      }
      const FunctionDecl *Function = Call->getDirectCallee();
      if (!Function)
        return;
      unsigned Shift =
          isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Function) ? 1
                                                                         : 0;
      for (unsigned I = 0; I < Call->getNumArgs(); ++I)
        if (Call->getArg(I)->IgnoreParenImpCasts() ==
                Outer->IgnoreParenImpCasts() &&
            I >= Shift && I - Shift < Function->getNumParams())
          if (namesClass(Function->getParamDecl(I - Shift)->getType(), Class))
            Unsafe.emplace(
                Decl,
                "it is passed as '" +
                    Function->getParamDecl(I - Shift)->getType().getAsString() +
                    "' to '" + Function->getNameAsString() +
                    "'; take a 'torch::optim::Optimizer &' "
                    "there to shard it");
      return;
    }
    if (const auto *Member = Parents[0].get<MemberExpr>())
      if (Member->getMemberDecl()->getIdentifier() &&
          (Member->getMemberDecl()->getName() == "save" ||
           Member->getMemberDecl()->getName() == "load"))
        Unsafe.emplace(Decl, "its state is saved or loaded with '." +
                                 Member->getMemberDecl()->getName().str() +
                                 "()': a sharded optimizer's state is "
                                 "consolidated on every rank first "
                                 "(consolidate_state_dict, "
                                 "docs/runtime-zero.md)");
  }

  /// T, T & or T * of the optimizer's own class (not a base such as
  /// torch::optim::Optimizer).
  static bool namesClass(QualType Type, const CXXRecordDecl *Class) {
    QualType Pointee = Type.getNonReferenceType();
    if (Pointee->isPointerType())
      Pointee = Pointee->getPointeeType();
    const auto *Record = Pointee->getAsCXXRecordDecl();
    return Class && Record &&
           Record->getCanonicalDecl() == Class->getCanonicalDecl();
  }

  /// The declaration Construct initialises and the written type to respell.
  struct Site {
    const ValueDecl *Decl = nullptr;
    TypeLoc Written;
  };

  Site siteOf(const CXXConstructExpr *Construct) {
    Site S;
    const Stmt *Child = Construct;
    DynTypedNodeList Parents = Context->getParents(*Construct);
    while (!Parents.empty()) {
      if (const auto *Var = Parents[0].get<VarDecl>()) {
        S.Decl = Var;
        break;
      }
      if (const auto *Init = Parents[0].get<CXXCtorInitializer>()) {
        S.Decl = Init->getMember();
        break;
      }
      if (const auto *Field = Parents[0].get<FieldDecl>()) {
        S.Decl = Field;
        break;
      }
      // The parent map may skip the initializer and name the constructor.
      if (const auto *Constructor = Parents[0].get<CXXConstructorDecl>()) {
        for (const CXXCtorInitializer *Init : Constructor->inits())
          if (Init->getInit() == Child && Init->getMember())
            S.Decl = Init->getMember();
        break;
      }
      const auto *E = Parents[0].get<Expr>();
      if (!E ||
          !isa<ExprWithCleanups, MaterializeTemporaryExpr, CXXBindTemporaryExpr,
               ImplicitCastExpr, CXXFunctionalCastExpr>(E))
        return {};
      Child = E;
      Parents = Context->getParents(*E);
    }
    if (!S.Decl)
      return {};
    const auto *Declarator = dyn_cast<DeclaratorDecl>(S.Decl);
    if (!Declarator || !Declarator->getTypeSourceInfo())
      return {};
    S.Written = Declarator->getTypeSourceInfo()->getTypeLoc();
    // `auto opt = torch::optim::Adam(...)`: the class is written at the
    // temporary.
    if (S.Written.getType()->getContainedAutoType()) {
      S.Written = TypeLoc();
      if (const auto *Temporary = dyn_cast<CXXTemporaryObjectExpr>(Construct))
        S.Written = Temporary->getTypeSourceInfo()->getTypeLoc();
      else if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(Child))
        S.Written = Cast->getTypeInfoAsWritten()->getTypeLoc();
    }
    return S;
  }

  void shard(const CXXConstructExpr *Construct) {
    Site S = siteOf(Construct);
    if (!S.Decl || S.Written.isNull())
      return; // A temporary or an argument: nothing holds the state.
    const Expr *Parameters = Construct->getArg(0);
    if (!takesModelParameters(Parameters)) {
      report(Construct->getSourceRange(),
             "its parameters are not a model's parameters(): only the "
             "optimizer of a wrapped model is sharded");
      return;
    }
    auto Why = Unsafe.find(S.Decl);
    if (Why != Unsafe.end()) {
      report(Construct->getSourceRange(), Why->second);
      return;
    }
    SourceRange Range = S.Written.getSourceRange();
    Finding F = Locator.make(*Context, Range, Rule, "");
    if (F.FilePath.empty() || !Done.insert({F.FilePath, F.Offset}).second)
      return;
    if (F.InMacro) {
      F.ReportId = ReportId.str();
      F.NotRewrittenReason = "the optimizer's type is spelled in a macro";
      F.Message = F.NotRewrittenReason;
      Findings.push_back(std::move(F));
      return;
    }
    std::string Type = sourceText(*Context, Range);
    F.replaceRangeWith("ddp::ZeroRedundancyOptimizer<" + Type + ">");
    F.Message = "the state of '" + S.Decl->getNameAsString() +
                "' is sharded over the ranks (ZeRO stage 1): "
                "ddp::ZeroRedundancyOptimizer<" +
                Type + ">";
    Findings.push_back(std::move(F));
  }

  void report(SourceRange Range, const std::string &Reason) {
    Finding F = Locator.make(*Context, Range, Rule, "");
    if (F.FilePath.empty() || !Done.insert({F.FilePath, F.Offset}).second)
      return;
    F.InMacro = false;
    F.MacroName.clear();
    F.ReportId = ReportId.str();
    F.NotRewrittenReason = "not sharded (--shard-optimizer): " + Reason;
    F.Message = F.NotRewrittenReason;
    Findings.push_back(std::move(F));
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::vector<const CXXConstructExpr *> Constructions;
  /// Optimizers that stay as they are, and why.
  std::map<const ValueDecl *, std::string> Unsafe;
  std::set<std::pair<std::string, unsigned>> Done;
};

const RuleInfo ShardOptimizersRows[] = {
    {Rule, "",
     "with --shard-optimizer: optimizers of wrapped models become "
     "ddp::ZeroRedundancyOptimizer (ZeRO stage 1)"},
};
} // namespace

extern const RuleUnit ShardOptimizers{
    ShardOptimizersRows, createModule<class ShardOptimizers>, /*OptIn=*/true};

} // namespace ddpify
