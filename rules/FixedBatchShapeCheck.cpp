//===- FixedBatchShapeCheck.cpp - ddp-fixed-batch-shape -------------------===//
//
// Inside a range-for over a data loader, or a pass over one by its iterator
// (`for (auto it = l->begin(); it != l->end(); ++it)`), `x.view({batch_size,
// -1})` (also `reshape`, `expand`) spells a dimension with the loader's batch
// size. A sharded loader's last batch is shorter (each rank holds 1/N of the
// data, and an evaluation shard is not padded), so the view throws on the
// ranks that get one and the others wait for them forever. The dimension
// becomes the batch's own size (`batch.data.size(0)`, `it->data.size(0)` in a
// pass by iterator). The loader must be built in
// the same function from `make_data_loader(dataset, batch_size)` or
// `DataLoaderOptions().batch_size(batch_size)` (torch's or ddp's loader, so
// a program already migrated is checked too); the batch size is matched as
// the same variable, or as the same number when both are written as numbers
// (then only for the first dimension). A lambda or a function of this unit
// that the loop hands its batch's input (`train_step(batch.data, ...)`) has
// its shapes rewritten too, to that parameter's own size (`data.size(0)`).
//
//===----------------------------------------------------------------------===//

#include "ddpify/LoaderIterators.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Lex/Lexer.h"
#include <functional>
#include <optional>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

constexpr llvm::StringLiteral Check = "ddp-fixed-batch-shape";

const Expr *strip(const Expr *E) {
  return E ? stripParensAndImplicit(E)->IgnoreParenImpCasts() : nullptr;
}

/// What the loader's batch size is written as.
struct BatchSize {
  const ValueDecl *Variable = nullptr; ///< `batch_size`, `kBatchSize`.
  std::optional<llvm::APSInt> Number;  ///< `64`, when written as a number.
  std::string Spelling;
};

class BatchShapeMatchers : public MatcherModule,
                           public MatchFinder::MatchCallback {
public:
  BatchShapeMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    Finder.addMatcher(cxxForRangeStmt().bind("loop"), this);
    Finder.addMatcher(forStmt().bind("pass"), this);
    Finder.addMatcher(whileStmt().bind("pass"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
  }

  void run(const MatchFinder::MatchResult &Result) override {
    const auto *Loop = Result.Nodes.getNodeAs<CXXForRangeStmt>("loop");
    Context = Result.Context;
    if (const auto *Pass = Result.Nodes.getNodeAs<Stmt>("pass")) {
      checkPass(Pass);
      return;
    }
    if (!Loop || !Loop->getRangeInit() ||
        !isDataLoaderType(Loop->getRangeInit()->getType()))
      return;
    std::optional<BatchSize> Size = loaderBatchSize(Loop->getRangeInit());
    if (!Size)
      return;
    std::string Actual = batchSizeOfIteration(Loop);
    if (Actual.empty())
      return;
    findShapes(Loop->getBody(), *Size, Actual);
    findShapesInCallees(Loop, *Size);
  }

private:
  /// A pass over a loader by its iterator (`for (auto it = l->begin();
  /// it != l->end(); ++it)`): the batch's own size through the iterator.
  void checkPass(const Stmt *Loop) {
    const VarDecl *Iterator = nullptr;
    const Expr *Walked = iteratorPassLoader(*Context, Loop, &Iterator);
    if (!Walked || !Iterator)
      return;
    std::optional<BatchSize> Size = loaderBatchSize(Walked);
    if (!Size)
      return;
    const auto *Spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(
        Iterator->getType().getCanonicalType()->getAsCXXRecordDecl());
    if (!Spec || Spec->getTemplateArgs().size() < 1 ||
        Spec->getTemplateArgs()[0].getKind() != TemplateArgument::Type)
      return;
    const CXXRecordDecl *Batch =
        Spec->getTemplateArgs()[0].getAsType()->getAsCXXRecordDecl();
    std::string Name = Iterator->getNameAsString();
    std::string Actual =
        !Batch ? ""
        : Batch->getQualifiedNameAsString() == "torch::data::Example"
            ? Name + "->data.size(0)"
        : Batch->getQualifiedNameAsString() == "at::Tensor" ? Name + "->size(0)"
        : Batch->getQualifiedNameAsString() == "std::vector"
            ? "static_cast<int64_t>(" + Name + "->size())"
            : "";
    if (Actual.empty())
      return;
    const Stmt *Body = isa<ForStmt>(Loop) ? cast<ForStmt>(Loop)->getBody()
                                          : cast<WhileStmt>(Loop)->getBody();
    findShapes(Body, *Size, Actual);
  }

  std::optional<BatchSize> loaderBatchSize(const Expr *Range) {
    const auto *Loader = dyn_cast_or_null<VarDecl>(loaderHolderOf(Range));
    if (!Loader || !Loader->getInit())
      return std::nullopt;
    const auto *Make = dyn_cast_or_null<CallExpr>(strip(Loader->getInit()));
    const FunctionDecl *Callee = Make ? Make->getDirectCallee() : nullptr;
    if (!Callee || Make->getNumArgs() < 2)
      return std::nullopt;
    std::string Name = Callee->getQualifiedNameAsString();
    if (Name != "torch::data::make_data_loader" &&
        Name != "ddp::make_data_loader" && Name != "ddp::make_eval_data_loader")
      return std::nullopt;
    // The options: the last argument written, but for ddp's ShardOptions
    // (ddp's overloads default one after the options: a migrated loader).
    const Expr *Last = nullptr;
    for (unsigned I = Make->getNumArgs(); I-- > 1 && !Last;) {
      const Expr *Arg = Make->getArg(I);
      if (isa<CXXDefaultArgExpr>(Arg) || isShardOptions(Arg->getType()))
        continue;
      Last = strip(Arg);
    }
    // `make_data_loader(dataset, 64)` converts the number to the options
    // (DataLoaderOptions(size_t)); a chain returning a reference is copied.
    // `DataLoaderOptions(64)` is a functional cast around the constructor.
    while (Last) {
      if (const auto *Cast = dyn_cast<CXXFunctionalCastExpr>(Last)) {
        Last = strip(Cast->getSubExpr());
        continue;
      }
      const auto *Construct = dyn_cast<CXXConstructExpr>(Last);
      if (!Construct || Construct->getNumArgs() != 1)
        break;
      Last = strip(Construct->getArg(0));
    }
    if (!Last)
      return std::nullopt;
    const Expr *Written = nullptr;
    if (Last->getType()->isIntegerType()) {
      Written = Last;
    } else {
      // `DataLoaderOptions().batch_size(n).workers(2)`: the batch_size call
      // in the chain.
      for (const Expr *E = Last; E;) {
        const auto *Member = dyn_cast<CXXMemberCallExpr>(E);
        if (!Member)
          break;
        const CXXMethodDecl *Method = Member->getMethodDecl();
        if (Method && Method->getIdentifier() &&
            Method->getName() == "batch_size" && Member->getNumArgs() == 1) {
          Written = strip(Member->getArg(0));
          break;
        }
        E = strip(Member->getImplicitObjectArgument());
      }
    }
    if (!Written)
      return std::nullopt;
    BatchSize Size;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Written))
      Size.Variable = Ref->getDecl();
    else if (const auto *Literal = dyn_cast<IntegerLiteral>(Written))
      Size.Number = llvm::APSInt(Literal->getValue());
    else
      return std::nullopt;
    Size.Spelling = sourceText(Written->getSourceRange());
    return Size;
  }

  static bool isShardOptions(QualType Type) {
    const CXXRecordDecl *Record =
        Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
    if (Record && Record->getQualifiedNameAsString() == "ddp::ShardOptions")
      return true;
    const auto *Enum = Type.getNonReferenceType()->getAs<EnumType>();
    return Enum && Enum->getDecl()->getQualifiedNameAsString() == "ddp::Shard";
  }

  /// How the loop's body names the size of its current batch.
  std::string batchSizeOfIteration(const CXXForRangeStmt *Loop) {
    const VarDecl *Var = Loop->getLoopVariable();
    if (!Var)
      return "";
    if (const auto *Bindings = dyn_cast<DecompositionDecl>(Var)) {
      if (Bindings->bindings().empty())
        return "";
      return Bindings->bindings()[0]->getNameAsString() + ".size(0)";
    }
    const CXXRecordDecl *Type =
        Var->getType().getNonReferenceType()->getAsCXXRecordDecl();
    if (!Type)
      return "";
    std::string Name = Type->getQualifiedNameAsString();
    if (Name == "torch::data::Example")
      return Var->getNameAsString() + ".data.size(0)";
    if (Name == "at::Tensor")
      return Var->getNameAsString() + ".size(0)";
    if (Name == "std::vector")
      return "static_cast<int64_t>(" + Var->getNameAsString() + ".size())";
    return "";
  }

  /// The batch's input tensor as the loop names it: `batch.data` of an
  /// example, the first structured binding, a tensor loop variable.
  static bool isBatchInput(const Expr *E, const CXXForRangeStmt *Loop) {
    const VarDecl *Var = Loop->getLoopVariable();
    E = strip(E);
    // A parameter taken by value: the copy of the argument.
    if (const auto *Copy = dyn_cast_or_null<CXXConstructExpr>(E))
      if (Copy->getNumArgs() == 1 &&
          Copy->getConstructor()->isCopyOrMoveConstructor())
        E = strip(Copy->getArg(0));
    if (!Var || !E)
      return false;
    if (const auto *Bindings = dyn_cast<DecompositionDecl>(Var)) {
      const auto *Ref = dyn_cast<DeclRefExpr>(E);
      return Ref && !Bindings->bindings().empty() &&
             Ref->getDecl() == Bindings->bindings()[0];
    }
    if (const auto *Member = dyn_cast<MemberExpr>(E)) {
      const auto *Base = dyn_cast<DeclRefExpr>(strip(Member->getBase()));
      return Base && Base->getDecl() == Var &&
             Member->getMemberDecl()->getName() == "data";
    }
    const auto *Ref = dyn_cast<DeclRefExpr>(E);
    return Ref && Ref->getDecl() == Var &&
           Var->getType().getNonReferenceType()->getAsCXXRecordDecl() &&
           Var->getType()
                   .getNonReferenceType()
                   ->getAsCXXRecordDecl()
                   ->getQualifiedNameAsString() == "at::Tensor";
  }

  /// A lambda or a function of the program, defined in this unit, that the
  /// loop hands its batch's input: `train_step(batch.data, batch.target)`.
  /// Its shapes spell the batch size as that parameter's own size.
  void findShapesInCallees(const CXXForRangeStmt *Loop, const BatchSize &Size) {
    std::function<void(const Stmt *)> Visit = [&](const Stmt *S) {
      if (!S || isa<LambdaExpr>(S))
        return;
      if (const auto *Call = dyn_cast<CallExpr>(S)) {
        const FunctionDecl *Callee = Call->getDirectCallee();
        const FunctionDecl *Definition = nullptr;
        unsigned Skip = 0;
        if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call)) {
          const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Callee);
          if (Op->getOperator() != OO_Call || !Method ||
              !Method->getParent()->isLambda())
            Callee = nullptr;
          Skip = 1; // The lambda object.
        }
        if (Callee && Callee->hasBody(Definition) && Definition &&
            Locator.isInRoot(*Context, Definition->getLocation()))
          for (unsigned I = Skip; I < Call->getNumArgs(); ++I) {
            unsigned Index = I - Skip;
            if (Index >= Definition->getNumParams() ||
                !isBatchInput(Call->getArg(I), Loop))
              continue;
            const ParmVarDecl *Param = Definition->getParamDecl(Index);
            if (Param->getName().empty())
              continue;
            findShapes(Definition->getBody(), Size,
                       Param->getNameAsString() + ".size(0)");
          }
      }
      for (const Stmt *Child : S->children())
        Visit(Child);
    };
    Visit(Loop->getBody());
  }

  bool isBatchSize(const Expr *Element, const BatchSize &Size,
                   bool FirstDimension) {
    Element = strip(Element);
    if (Size.Variable)
      if (const auto *Ref = dyn_cast<DeclRefExpr>(Element))
        return Ref->getDecl() == Size.Variable;
    if (Size.Number && FirstDimension)
      if (const auto *Literal = dyn_cast<IntegerLiteral>(Element))
        return llvm::APSInt::isSameValue(llvm::APSInt(Literal->getValue()),
                                         *Size.Number);
    return false;
  }

  static const InitListExpr *bracedSizes(const Stmt *S) {
    if (!S)
      return nullptr;
    if (const auto *List = dyn_cast<InitListExpr>(S))
      return List;
    for (const Stmt *Child : S->children())
      if (const InitListExpr *List = bracedSizes(Child))
        return List;
    return nullptr;
  }

  void findShapes(const Stmt *S, const BatchSize &Size,
                  const std::string &Actual) {
    if (!S || isa<LambdaExpr>(S))
      return;
    if (const auto *Call = dyn_cast<CXXMemberCallExpr>(S))
      checkShape(Call, Size, Actual);
    for (const Stmt *Child : S->children())
      findShapes(Child, Size, Actual);
  }

  void checkShape(const CXXMemberCallExpr *Call, const BatchSize &Size,
                  const std::string &Actual) {
    const CXXMethodDecl *Method = Call->getMethodDecl();
    if (!Method || !Method->getIdentifier() || Call->getNumArgs() < 1)
      return;
    llvm::StringRef Name = Method->getName();
    std::string Class = Method->getParent()->getQualifiedNameAsString();
    if ((Name != "view" && Name != "reshape" && Name != "expand") ||
        (Class != "at::Tensor" && Class != "at::TensorBase"))
      return;
    const InitListExpr *Sizes = bracedSizes(Call->getArg(0));
    if (!Sizes)
      return;
    for (unsigned I = 0; I < Sizes->getNumInits(); ++I) {
      const Expr *Element = Sizes->getInit(I);
      if (!isBatchSize(Element, Size, I == 0))
        continue;
      Finding F =
          Locator.make(*Context, strip(Element)->getSourceRange(), "R4", Check);
      if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
        continue;
      F.Message = "'" + Name.str() +
                  "' spells a dimension with the "
                  "loader's batch size '" +
                  Size.Spelling +
                  "': a sharded loader's last batch is shorter, so this "
                  "throws on some ranks while the others wait; use the "
                  "batch's own size, '" +
                  Actual + "'";
      if (!F.InMacro)
        F.Edits.push_back({F.Offset, F.Length, Actual});
      Findings.push_back(std::move(F));
    }
  }

  std::string sourceText(SourceRange Range) {
    return Lexer::getSourceText(CharSourceRange::getTokenRange(Range),
                                Context->getSourceManager(),
                                Context->getLangOpts())
        .str();
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
};

const RuleInfo FixedBatchShapeCheckRows[] = {
    {"R4", "ddp-fixed-batch-shape",
     "a view/reshape/expand spelling a dimension with the loader's batch "
     "size, in a loop over it, uses the batch's own size"},
};
} // namespace

extern const RuleUnit FixedBatchShapeCheck{FixedBatchShapeCheckRows,
                                           createModule<BatchShapeMatchers>};

} // namespace ddpify
