//===- Work.cpp - What must run on every process --------------------------===//

#include "ddpify/Work.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/MetricLoops.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "llvm/ADT/StringSwitch.h"

using namespace clang;

namespace ddpify {
namespace {

std::string qualifiedName(const NamedDecl *D) {
  return D ? D->getQualifiedNameAsString() : "";
}

/// `l->begin()`, `l.begin()` on a data loader.
bool isLoaderBegin(const CallExpr *Call) {
  const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
  const CXXMethodDecl *Method = Member ? Member->getMethodDecl() : nullptr;
  if (!Method || !Method->getIdentifier() || Method->getName() != "begin")
    return false;
  const Expr *Object = Member->getImplicitObjectArgument();
  QualType Type = Object ? Object->getType() : QualType();
  if (!Type.isNull() && Type->isPointerType())
    Type = Type->getPointeeType();
  return !Type.isNull() && isDataLoaderType(Type);
}

bool derivesFromOstream(QualType T) {
  if (T.isNull())
    return false;
  T = T.getNonReferenceType();
  if (T->isPointerType())
    T = T->getPointeeType();
  const auto *Record = T->getAsCXXRecordDecl();
  if (!Record || !Record->hasDefinition())
    return Record && qualifiedName(Record) == "std::basic_ostream";
  if (qualifiedName(Record) == "std::basic_ostream")
    return true;
  bool Found = false;
  Record->forallBases([&](const CXXRecordDecl *Base) {
    Found = Found || qualifiedName(Base) == "std::basic_ostream";
    return true;
  });
  return Found;
}

} // namespace

std::string qualifiedCalleeName(const CallExpr *Call) {
  if (const FunctionDecl *Callee = Call->getDirectCallee())
    return qualifiedName(Callee);
  if (const auto *Lookup =
          dyn_cast<UnresolvedLookupExpr>(Call->getCallee()->IgnoreImplicit())) {
    std::string Name = Lookup->getName().getAsString();
    if (NestedNameSpecifier *Qualifier = Lookup->getQualifier())
      if (const NamespaceDecl *NS = Qualifier->getAsNamespace())
        return NS->getName().str() + "::" + Name;
    return Name;
  }
  return "";
}

bool isForwardPass(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee)
    return false;
  if (Callee->getIdentifier() && Callee->getName() == "forward")
    return true;
  const auto *Method = dyn_cast<CXXMethodDecl>(Callee);
  return Method && Method->getOverloadedOperator() == OO_Call &&
         qualifiedName(Method->getParent()) == "torch::nn::ModuleHolder";
}

bool isIncrementOrAssignment(const Expr *E) {
  if (const auto *Unary = dyn_cast<UnaryOperator>(E))
    return Unary->isIncrementDecrementOp();
  if (const auto *Binary = dyn_cast<BinaryOperator>(E))
    return Binary->isAssignmentOp();
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    return Op->isAssignmentOp() || Op->getOperator() == OO_PlusPlus ||
           Op->getOperator() == OO_MinusMinus;
  return false;
}

bool isStreamChain(const Expr *E) {
  E = stripParensAndImplicit(E);
  if (!E)
    return false;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    if (Op->getOperator() == OO_LessLess && Op->getNumArgs() >= 1)
      return isStreamChain(Op->getArg(0));
  if (const auto *Bin = dyn_cast<BinaryOperator>(E)) // dependent operands
    if (Bin->getOpcode() == BO_Shl)
      return isStreamChain(Bin->getLHS());
  if (const auto *Deref = dyn_cast<UnaryOperator>(E))
    if (Deref->getOpcode() == UO_Deref)
      return derivesFromOstream(Deref->getSubExpr()->getType());
  return !E->isTypeDependent() && derivesFromOstream(E->getType());
}

bool isOutputStatement(const Expr *E) {
  E = stripParensAndImplicit(E);
  if (!E)
    return false;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(E))
    return Op->getOperator() == OO_LessLess && isStreamChain(E);
  if (const auto *Bin = dyn_cast<BinaryOperator>(E))
    return Bin->getOpcode() == BO_Shl && isStreamChain(E);
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    return Method && Method->getIdentifier() && Method->getName() == "flush" &&
           isStreamChain(Member->getImplicitObjectArgument());
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    std::string Callee = qualifiedCalleeName(Call);
    llvm::StringRef Name = Callee;
    Name.consume_front("std::");
    return llvm::StringSwitch<bool>(Name)
        .Cases("printf", "puts", "putchar", "fprintf", "fputs", "fputc", true)
        .Cases("putc", "fflush", "vprintf", "vfprintf", true)
        .Default(false);
  }
  return false;
}

bool doesWork(const Expr *E, ProgramFunctionFilter IsProgramFunction) {
  if (isIncrementOrAssignment(E))
    return true;
  const auto *Call = dyn_cast<CallExpr>(E);
  if (!Call)
    return false;
  if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Call)) {
    // The printing itself.
    if (Op->getOperator() == OO_LessLess && isStreamChain(Op->getArg(0)))
      return false;
  }
  const FunctionDecl *Callee = Call->getDirectCallee();
  std::string Name = qualifiedCalleeName(Call);
  if (!Callee) {
    // A member of a dependent object (`loss.template item<float>()` in a
    // template's pattern): a forward pass or not.
    const Expr *CalleeExpr = Call->getCallee()->IgnoreParenImpCasts();
    if (const auto *Member = dyn_cast<CXXDependentScopeMemberExpr>(CalleeExpr))
      return Member->getMember().getAsString() == "forward";
    if (const auto *Member = dyn_cast<UnresolvedMemberExpr>(CalleeExpr))
      return Member->getName().getAsString() == "forward";
    // Otherwise not resolved (a free function in a template's pattern, a
    // function pointer, a dependent callable): only standard and LibTorch
    // names are known not to do work.
    llvm::StringRef Ref = Name;
    return Ref.empty() ||
           !(Ref.starts_with("std::") || Ref.starts_with("torch::"));
  }
  llvm::StringRef Ref = Name;
  if (Ref.starts_with("ddp::") || Ref.starts_with("c10d::"))
    return true;
  if (isForwardPass(Call))
    return true;
  // A pass over a data loader starts at its begin(): ddp's sampler takes
  // the next epoch's shuffle there, which every process must take alike.
  // The count of its batches, `std::distance(l->begin(), l->end())`, is
  // such a pass as a whole.
  if (isLoaderBegin(Call))
    return true;
  if (Ref == "std::distance" && Call->getNumArgs() == 2)
    if (const auto *First = dyn_cast<CallExpr>(stripCopies(Call->getArg(0))))
      if (isLoaderBegin(First))
        return true;
  if (Callee->getIdentifier()) {
    llvm::StringRef Short = Callee->getName();
    if (Ref.starts_with("torch::") &&
        (Short.starts_with("rand") || Short == "normal" ||
         Short == "bernoulli" || Short == "multinomial" ||
         Short.contains("dropout")))
      return true;
    if (Ref == "rand" || Ref == "std::rand" || Ref == "random")
      return true;
  }
  if (!IsProgramFunction(Callee))
    return false;
  // The program's own `operator<<` for its types prints; it does not
  // compute what the other processes need.
  if (Callee->getOverloadedOperator() == OO_LessLess &&
      Callee->getNumParams() >= 1 &&
      llvm::StringRef(Callee->getParamDecl(0)->getType().getAsString())
          .contains("ostream"))
    return false;
  return true;
}

bool containsWork(const Stmt *S, ProgramFunctionFilter IsProgramFunction) {
  if (!S || isa<LambdaExpr>(S))
    return false;
  if (const auto *E = dyn_cast<Expr>(S))
    if (doesWork(E, IsProgramFunction))
      return true;
  for (const Stmt *Child : S->children())
    if (containsWork(Child, IsProgramFunction))
      return true;
  return false;
}

} // namespace ddpify
