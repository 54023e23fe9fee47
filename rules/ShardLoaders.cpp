//===- ShardLoaders.cpp - R4: data loaders sharded across ranks -----------===//
//
// R4 finds every call of `torch::data::make_data_loader` (any overload: a
// sampler template argument or none, a sampler object, DataLoaderOptions or a
// bare batch size) and decides how its samples are split across ranks:
//  - even (`ddp::make_data_loader`, padded so every rank runs the same number
//    of batches) when the loader's batches reach a `backward()` call: the
//    loader is iterated by a range-for (directly, or by a function of this
//    project it is passed to) whose body calls `.backward()`, itself or
//    through the functions and lambdas of the project it calls (two calls
//    deep: a lambda calling a train step);
//  - exact (`ddp::make_eval_data_loader`, no sample twice) when every
//    iteration found is free of backward();
//  - even plus a `loader-use-unknown` report item when the uses cannot be
//    followed (passed to a function whose body is not visible, stored in a
//    global, never iterated here): a rank running one batch fewer would hang
//    the others, duplicated evaluation samples only skew a metric.
// A count of its batches (`std::distance(l->begin(), l->end())`, here or in a
// helper it is passed to) reads no batch and decides nothing: after sharding
// it is this rank's number of batches, the same on every rank and the number
// of steps this rank's loop takes, which is what a progress line's total or
// a schedule's steps per epoch need.
// A loader is followed through the variables, parameters, members (of a class
// of the main file) and function results (of functions of the main file) that
// hold it; where their types spell out torch's StatelessDataLoader, that
// spelling becomes ddp::DistributedDataLoader (same template arguments), the
// type ddp's functions return.
// Report items instead of an edit: a sampler that is not torch's
// RandomSampler / SequentialSampler (`custom-sampler`), a stateful dataset
// (`stateful-dataset`), a loader whose type is written out where ddpify
// cannot rewrite it (`loader-type-written`). Loaders over a torch
// Distributed*Sampler are already sharded and left alone.
//
//===----------------------------------------------------------------------===//

#include "ddpify/LoaderIterators.h"
#include "ddpify/MatcherUtil.h"
#include "ddpify/Registry.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/AST/StmtCXX.h"
#include "clang/AST/TypeLoc.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/SmallPtrSet.h"
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace ddpify {
namespace {

const char LoaderName[] = "torch::data::make_data_loader";

/// Whether Record is, or derives from, a class named QualifiedName (a class
/// template's specializations carry the template's name).
bool isOrDerivesFrom(const CXXRecordDecl *Record, llvm::StringRef QualifiedName,
                     int Depth = 0) {
  if (!Record || Depth > 16)
    return false;
  if (Record->getQualifiedNameAsString() == QualifiedName)
    return true;
  if (!Record->hasDefinition())
    return false;
  for (const CXXBaseSpecifier &Base : Record->bases())
    if (isOrDerivesFrom(Base.getType()->getAsCXXRecordDecl(), QualifiedName,
                        Depth + 1))
      return true;
  return false;
}

const CXXRecordDecl *recordOf(QualType Type) {
  if (Type.isNull() || Type->isDependentType())
    return nullptr;
  return Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
}

/// The type argument Index of a class template specialization.
QualType templateTypeArgument(const CXXRecordDecl *Record, unsigned Index) {
  const auto *Spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  if (!Spec || Spec->getTemplateArgs().size() <= Index ||
      Spec->getTemplateArgs()[Index].getKind() != TemplateArgument::Type)
    return QualType();
  return Spec->getTemplateArgs()[Index].getAsType();
}

/// Whether Sampler's batch request is an index vector, which
/// ddp::DistributedSampler can split.
bool producesIndexVectors(const CXXRecordDecl *Sampler, int Depth = 0) {
  if (!Sampler || Depth > 16 || !Sampler->hasDefinition())
    return false;
  if (Sampler->getQualifiedNameAsString() == "torch::data::samplers::Sampler") {
    const CXXRecordDecl *Request = recordOf(templateTypeArgument(Sampler, 0));
    return Request && Request->getQualifiedNameAsString() == "std::vector";
  }
  for (const CXXBaseSpecifier &Base : Sampler->bases())
    if (producesIndexVectors(Base.getType()->getAsCXXRecordDecl(), Depth + 1))
      return true;
  return false;
}

enum class SamplerKind { Standard, Distributed, Custom };

SamplerKind classifySampler(const CXXRecordDecl *Sampler) {
  if (!Sampler)
    return SamplerKind::Standard; // Unknown here: torch's default.
  std::string Name = Sampler->getQualifiedNameAsString();
  if (Name == "torch::data::samplers::RandomSampler" ||
      Name == "torch::data::samplers::SequentialSampler")
    return SamplerKind::Standard;
  if (isOrDerivesFrom(Sampler, "torch::data::samplers::DistributedSampler") ||
      isOrDerivesFrom(Sampler, "ddp::DistributedSampler"))
    return SamplerKind::Distributed;
  return SamplerKind::Custom;
}

/// What the uses of a loader tell about its batches.
struct LoaderUse {
  bool Iterated = false; ///< A pass over it was found (range-for, iterator).
  /// Batches drawn through begin() other than in a pass to its end.
  bool Drawn = false;
  /// Its batches counted (`std::distance(l->begin(), l->end())`): no batch
  /// reaches the program, and over a sharded loader the count is this
  /// rank's number of batches, the same on every rank.
  bool Counted = false;
  bool Backward = false;  ///< One of them reaches backward().
  bool Unknown = false;   ///< A use that could not be followed.
  std::string UnknownWhy; ///< The first such use, for the report.
  /// Parameters of functions of the project defined in other units that the
  /// loader is passed to (their keys, see parameterKey): what those units
  /// say of them decides (Finding::Requires). Unknown is set with them.
  std::vector<std::string> Deferred;
  /// An unknown use that no other unit can decide.
  bool UnknownHere = false;
  /// `torch::data::StatelessDataLoader` as written in the types that hold the
  /// loader, and where each type is: each becomes `ddp::DistributedDataLoader`.
  std::vector<std::pair<SourceRange, std::string>> TypeSpellings;
  bool TypeUnfixable = false; ///< A written type ddpify cannot rewrite.
  std::string TypeWhere;      ///< The first such type, for the report.
  /// The call only names a type (`decltype(make_data_loader(...))`): no
  /// loader is made there.
  bool TypeOnly = false;
  /// What holds the loader (loaderHolderKey): a loader left unsharded says
  /// so of each, for R11.
  std::vector<std::string> Holders;

  void unknown(std::string Why) {
    if (!Unknown)
      UnknownWhy = std::move(Why);
    Unknown = true;
    UnknownHere = true;
  }
  void deferred(std::string Key, std::string Why) {
    if (!Unknown)
      UnknownWhy = std::move(Why);
    Unknown = true;
    Deferred.push_back(std::move(Key));
  }
  void unfixableType(std::string Where) {
    if (!TypeUnfixable)
      TypeWhere = std::move(Where);
    TypeUnfixable = true;
  }
  void merge(const LoaderUse &Other) {
    Iterated |= Other.Iterated;
    Drawn |= Other.Drawn;
    Counted |= Other.Counted;
    Backward |= Other.Backward;
    Holders.insert(Holders.end(), Other.Holders.begin(), Other.Holders.end());
    if (Other.Unknown && !Unknown)
      UnknownWhy = Other.UnknownWhy;
    Unknown |= Other.Unknown;
    UnknownHere |= Other.UnknownHere;
    Deferred.insert(Deferred.end(), Other.Deferred.begin(),
                    Other.Deferred.end());
    TypeSpellings.insert(TypeSpellings.end(), Other.TypeSpellings.begin(),
                         Other.TypeSpellings.end());
    if (Other.TypeUnfixable)
      unfixableType(Other.TypeWhere);
  }
};

/// The function a call calls: resolved, the only candidate of an unresolved
/// name, or the call operator of a lambda held by a variable.
const FunctionDecl *calleeOf(const CallExpr *Call) {
  if (const FunctionDecl *Direct = Call->getDirectCallee())
    return Direct;
  const Expr *Callee = stripParensAndImplicit(Call->getCallee());
  if (const auto *Lookup = dyn_cast<UnresolvedLookupExpr>(Callee)) {
    if (Lookup->getNumDecls() != 1)
      return nullptr;
    const NamedDecl *Only = (*Lookup->decls_begin())->getUnderlyingDecl();
    if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Only))
      return Template->getTemplatedDecl();
    return dyn_cast<FunctionDecl>(Only);
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(Callee))
    if (const CXXRecordDecl *Record = recordOf(Ref->getType()))
      if (Record->isLambda())
        return Record->getLambdaCallOperator();
  return nullptr;
}

/// Whether Spec spells `torch::data::StatelessDataLoader<...>`.
bool namesStatelessLoaderTemplate(TemplateSpecializationTypeLoc Spec) {
  const TemplateDecl *Template =
      Spec.getTypePtr()->getTemplateName().getAsTemplateDecl();
  return Template && Template->getQualifiedNameAsString() ==
                         "torch::data::StatelessDataLoader";
}

/// What a respelling of the loader template named in Type replaces: its
/// qualifier and template name, not the arguments.
SourceRange loaderNameRange(ElaboratedTypeLoc Type,
                            TemplateSpecializationTypeLoc Spec) {
  NestedNameSpecifierLoc Qualifier = Type.getQualifierLoc();
  return SourceRange(Qualifier ? Qualifier.getBeginLoc()
                               : Spec.getTemplateNameLoc(),
                     Spec.getTemplateNameLoc());
}

/// The spellings of `torch::data::StatelessDataLoader<...>` in a written
/// type, through the aliases (`using`, `typedef`, alias templates) it names.
/// Only Loader's own type counts (any, where Loader is unknown or the
/// spelling is dependent): ddp's loader takes the same template arguments.
class LoaderTypeSpellings : public RecursiveASTVisitor<LoaderTypeSpellings> {
public:
  explicit LoaderTypeSpellings(const CXXRecordDecl *Loader) : Loader(Loader) {}

  bool VisitElaboratedTypeLoc(ElaboratedTypeLoc Type) {
    auto Spec = Type.getNamedTypeLoc().getAs<TemplateSpecializationTypeLoc>();
    if (!Spec || !isLoaderSpelling(Spec))
      return true;
    Spellings.push_back(loaderNameRange(Type, Spec));
    Counted.insert(Spec.getOpaqueData());
    return true;
  }

  bool VisitTemplateSpecializationTypeLoc(TemplateSpecializationTypeLoc Spec) {
    if (Counted.count(Spec.getOpaqueData()))
      return true;
    if (isLoaderSpelling(Spec)) {
      Spellings.push_back(
          SourceRange(Spec.getTemplateNameLoc(), Spec.getTemplateNameLoc()));
      return true;
    }
    if (const auto *Alias = dyn_cast_or_null<TypeAliasTemplateDecl>(
            Spec.getTypePtr()->getTemplateName().getAsTemplateDecl()))
      followAlias(Alias->getTemplatedDecl());
    return true;
  }

  bool VisitTypedefTypeLoc(TypedefTypeLoc Type) {
    followAlias(Type.getTypedefNameDecl());
    return true;
  }

  bool VisitDecltypeTypeLoc(DecltypeTypeLoc) {
    // Names the type of an expression, which changes with it.
    FollowsLoader = true;
    return true;
  }

  bool VisitSubstTemplateTypeParmTypeLoc(SubstTemplateTypeParmTypeLoc) {
    // A template parameter, in an instantiation: deduced from the loader.
    FollowsLoader = true;
    return true;
  }

  std::vector<SourceRange> Spellings;
  /// Whether the type is spelled by something that takes ddp's loader type
  /// as it is (a template parameter, a decltype).
  bool FollowsLoader = false;

private:
  bool isLoaderSpelling(TemplateSpecializationTypeLoc Spec) const {
    if (!namesStatelessLoaderTemplate(Spec))
      return false;
    if (!Loader || Spec.getType()->isDependentType())
      return true;
    const CXXRecordDecl *Written = recordOf(Spec.getType());
    return Written && Written->getCanonicalDecl() == Loader->getCanonicalDecl();
  }

  void followAlias(const TypedefNameDecl *Alias) {
    if (Alias && Alias->getTypeSourceInfo() && Aliases.insert(Alias).second)
      TraverseTypeLoc(Alias->getTypeSourceInfo()->getTypeLoc());
  }

  const CXXRecordDecl *Loader;
  llvm::SmallPtrSet<const void *, 8> Counted;
  llvm::SmallPtrSet<const TypedefNameDecl *, 4> Aliases;
};

/// The key of a loader type among the whole program's facts (Finding's
/// Provides and Requires): its canonical spelling, the same in every unit.
/// A type's fully qualified spelling: for a canonical type, the same in
/// every unit.
std::string qualifiedSpelling(QualType Type, const ASTContext &Context) {
  PrintingPolicy Policy(Context.getLangOpts());
  Policy.FullyQualifiedName = true;
  Policy.SuppressScope = false;
  return Type.getAsString(Policy);
}

std::string loaderTypeKey(QualType Type, const ASTContext &Context) {
  return "ddp-loader-type:" +
         qualifiedSpelling(Type.getCanonicalType().getUnqualifiedType(),
                           Context);
}

/// The facts a unit gives of a parameter of a function it defines that
/// holds a loader: its batches reach backward(), or it is iterated and they
/// never do.
std::string trainsThroughKey(llvm::StringRef Parameter) {
  return "ddp-loader-parameter-trains:" + Parameter.str();
}
std::string evaluatesThroughKey(llvm::StringRef Parameter) {
  return "ddp-loader-parameter-evaluates:" + Parameter.str();
}

/// The messages of a loader call's edit and of its report item, with why.
std::string evenShardsMessage(llvm::StringRef Why) {
  return ("data loader without a distributed sampler: every rank would "
          "train on the whole dataset; use 'ddp::make_data_loader' (even "
          "shards: " +
          Why + ")")
      .str();
}
std::string exactShardsMessage(llvm::StringRef Why) {
  return ("data loader without a distributed sampler: every rank would "
          "evaluate the whole dataset; use 'ddp::make_eval_data_loader' "
          "(exact shards: " +
          Why + ")")
      .str();
}
std::string unknownUseReason(llvm::StringRef Why) {
  return ("whether this loader's batches reach backward() is not known (" +
          Why +
          "): sharded evenly (padded, a few samples seen twice); if it only "
          "evaluates, use ddp::make_eval_data_loader for exact metrics")
      .str();
}

/// In the declarations it traverses (patterns, not instantiations): every
/// non-dependent spelling of `torch::data::StatelessDataLoader<...>` (the
/// range a respelling replaces and the spelled type), and every function
/// defined there (whose loader parameters the unit gives facts of).
class AllLoaderSpellings : public RecursiveASTVisitor<AllLoaderSpellings> {
public:
  bool VisitElaboratedTypeLoc(ElaboratedTypeLoc Type) {
    auto Spec = Type.getNamedTypeLoc().getAs<TemplateSpecializationTypeLoc>();
    if (Spec && namesStatelessLoaderTemplate(Spec) &&
        !Spec.getType()->isDependentType())
      Found.push_back({loaderNameRange(Type, Spec), Spec.getType()});
    return true;
  }
  bool VisitFunctionDecl(FunctionDecl *Function) {
    if (Function->doesThisDeclarationHaveABody() &&
        !Function->isDependentContext() && !Function->isTemplateInstantiation())
      Definitions.push_back(Function);
    return true;
  }

  std::vector<std::pair<SourceRange, QualType>> Found;
  std::vector<const FunctionDecl *> Definitions;
};

/// The expressions of the project's code that name Target (a function or a
/// field): references, member accesses, unresolved names it is a candidate
/// of, dependent member accesses of its name.
class NameUses : public RecursiveASTVisitor<NameUses> {
public:
  explicit NameUses(const NamedDecl *Target)
      : Target(canonicalOf(Target)), Name(Target->getNameAsString()) {}

  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    if (canonicalOf(Ref->getDecl()) == Target)
      Uses.push_back(Ref);
    return true;
  }
  bool VisitMemberExpr(MemberExpr *Member) {
    if (canonicalOf(Member->getMemberDecl()) == Target)
      Uses.push_back(Member);
    return true;
  }
  bool VisitOverloadExpr(OverloadExpr *Overload) {
    for (const NamedDecl *Candidate : Overload->decls()) {
      const NamedDecl *Named = Candidate->getUnderlyingDecl();
      if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Named))
        Named = Template->getTemplatedDecl();
      if (Named->getCanonicalDecl() == Target) {
        Unresolved = true;
        break;
      }
    }
    return true;
  }
  bool VisitCXXDependentScopeMemberExpr(CXXDependentScopeMemberExpr *Member) {
    if (Member->getMember().getAsString() == Name)
      Unresolved = true;
    return true;
  }

  std::vector<const Expr *> Uses;
  bool Unresolved = false; ///< A use whose meaning a template decides.

private:
  /// A specialization of a function template names its pattern.
  static const Decl *canonicalOf(const NamedDecl *Named) {
    if (const auto *Function = dyn_cast<FunctionDecl>(Named))
      if (const FunctionDecl *Pattern =
              Function->getTemplateInstantiationPattern())
        return Pattern->getCanonicalDecl();
    return Named->getCanonicalDecl();
  }

  const Decl *Target;
  std::string Name;
};

class DataMatchers : public MatcherModule, public MatchFinder::MatchCallback {
public:
  DataMatchers(FindingList &Findings, llvm::StringRef ProjectRoot)
      : Findings(Findings), Locator(ProjectRoot) {}

  void registerMatchers(MatchFinder &Finder) override {
    // The written call once: in a template, the pattern (calls with
    // dependent arguments stay unresolved there), never its instantiations.
    Finder.addMatcher(
        declRefExpr(to(functionDecl(hasName(std::string("::") + LoaderName))),
                    unless(isInTemplateInstantiation()))
            .bind("ref"),
        this);
    Finder.addMatcher(unresolvedLookupExpr().bind("unresolved"), this);
    // Only to have the unit's context at its end (onEndOfTranslationUnit).
    Finder.addMatcher(translationUnitDecl().bind("unit"), this);
  }

  void onStartOfTranslationUnit() override {
    Locator.reset();
    Seen.clear();
  }

  /// Where another unit makes a loader of a type ddp's loader replaces and
  /// hands it here (a member of a header's class, a factory of another
  /// unit), this unit's spellings of that type must change too: each is
  /// an edit that holds only if some unit converts a loader of that type
  /// and none keeps one (Finding::Requires).
  void onEndOfTranslationUnit() override {
    if (!Context)
      return;
    // The project's declarations only: a type-spelling matcher would run on
    // every type LibTorch's headers spell.
    AllLoaderSpellings Visitor;
    for (Decl *TopLevel : Context->getTranslationUnitDecl()->decls())
      if (isOurs(TopLevel->getLocation()))
        Visitor.TraverseDecl(TopLevel);
    for (const auto &[Range, Type] : Visitor.Found) {
      if (Range.getBegin().isMacroID() || Range.getEnd().isMacroID())
        continue;
      Finding Edit = Locator.make(*Context, Range, "R4", "");
      if (Edit.FilePath.empty() || Edit.InMacro)
        continue;
      Edit.replaceRangeWith("ddp::DistributedDataLoader");
      Edit.Requires = {loaderTypeKey(Type, *Context)};
      Edit.Message = "torch's loader type, written where another unit's "
                     "loader of ddp::make_data_loader may go: use "
                     "'ddp::DistributedDataLoader' (same template arguments)";
      Findings.push_back(std::move(Edit));
    }
    provideParameterFacts(Visitor.Definitions);
    Context = nullptr;
  }

  /// For each function of the project defined in this unit that takes a
  /// loader of torch's type: whether its batches reach backward() there, or
  /// are only evaluated, for the units whose loaders are passed to it.
  void provideParameterFacts(llvm::ArrayRef<const FunctionDecl *> Definitions) {
    for (const FunctionDecl *Function : Definitions)
      for (unsigned I = 0; I < Function->getNumParams(); ++I) {
        const ParmVarDecl *Param = Function->getParamDecl(I);
        QualType Type = Param->getType().getNonReferenceType();
        if (Type->isPointerType())
          Type = Type->getPointeeType();
        if (!namesStatelessLoader(Type))
          continue;
        CurrentLoader = loaderRecordOf(Type);
        LoaderUse Use = useOfVariable(Param, /*Hops=*/1);
        CurrentLoader = nullptr;
        std::string Key = parameterKey(Function, I, *Context);
        Finding Fact;
        Fact.RuleId = "R4";
        if (Use.Backward)
          Fact.Provides = trainsThroughKey(Key);
        else if (Use.Iterated && !Use.Unknown)
          Fact.Provides = evaluatesThroughKey(Key);
        else
          continue;
        Findings.push_back(std::move(Fact));
      }
  }

  void run(const MatchFinder::MatchResult &Result) override {
    Context = Result.Context;
    SourceLocation QualifierBegin, NameLoc;
    const Expr *Callee = nullptr;
    if (const auto *Ref = Result.Nodes.getNodeAs<DeclRefExpr>("ref")) {
      Callee = Ref;
      NameLoc = Ref->getLocation();
      QualifierBegin = Ref->getQualifierLoc().getBeginLoc();
    } else if (const auto *Lookup =
                   Result.Nodes.getNodeAs<UnresolvedLookupExpr>("unresolved")) {
      if (!namesLoaderFunction(Lookup))
        return;
      Callee = Lookup;
      NameLoc = Lookup->getNameLoc();
      QualifierBegin = Lookup->getQualifierLoc().getBeginLoc();
    }
    if (!Callee)
      return;
    const CallExpr *Call = enclosingCall(Callee);
    if (!Call)
      return; // Its address taken, or named in an unevaluated context.
    SourceRange Range(QualifierBegin.isValid() ? QualifierBegin : NameLoc,
                      NameLoc);
    Finding F = Locator.make(*Context, Range, "R4", "ddp-unsharded-loader");
    if (F.FilePath.empty() || !Seen.insert({F.FilePath, F.Offset}).second)
      return;
    handleCall(Call, std::move(F));
  }

private:
  // --- The call and its types --------------------------------------------

  static bool namesLoaderFunction(const UnresolvedLookupExpr *Lookup) {
    if (Lookup->getName().getAsString() != "make_data_loader")
      return false;
    for (const NamedDecl *D : Lookup->decls()) {
      const NamedDecl *Target = D->getUnderlyingDecl();
      if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Target))
        Target = Template->getTemplatedDecl();
      if (Target->getQualifiedNameAsString() == LoaderName)
        return true;
    }
    return false;
  }

  /// The call whose callee is Callee (through its implicit decay).
  const CallExpr *enclosingCall(const Expr *Callee) {
    DynTypedNode Node = DynTypedNode::create(*Callee);
    for (int Depth = 0; Depth < 3; ++Depth) {
      DynTypedNodeList Parents = Context->getParents(Node);
      if (Parents.empty())
        return nullptr;
      Node = Parents[0];
      if (const auto *Call = Node.get<CallExpr>())
        return stripParensAndImplicit(Call->getCallee()) == Callee ? Call
                                                                   : nullptr;
      if (!Node.get<ImplicitCastExpr>())
        return nullptr;
    }
    return nullptr;
  }

  /// Says, for the whole program, whether loaders of type Loader (a
  /// StatelessDataLoader) become ddp's or stay torch's.
  void noteLoaderFate(const CXXRecordDecl *Loader, bool Converted) {
    if (!Loader || Loader->getQualifiedNameAsString() !=
                       "torch::data::StatelessDataLoader")
      return;
    Finding Fact;
    Fact.RuleId = "R4";
    Fact.Provides = (Converted ? "" : "!") +
                    loaderTypeKey(Context->getRecordType(Loader), *Context);
    Findings.push_back(std::move(Fact));
  }

  void handleCall(const CallExpr *Call, Finding F) {
    // The dataset and sampler types: from the resolved call's type
    // (unique_ptr<StatelessDataLoader<Dataset, Sampler>> or
    // unique_ptr<StatefulDataLoader<Dataset>>), else from what is written.
    const CXXRecordDecl *Dataset = nullptr, *Sampler = nullptr;
    bool Stateful = false;
    const CXXRecordDecl *Loader =
        recordOf(templateTypeArgument(recordOf(Call->getType()), 0));
    if (Loader && Loader->getQualifiedNameAsString() ==
                      "torch::data::StatefulDataLoader") {
      Stateful = true;
      Dataset = recordOf(templateTypeArgument(Loader, 0));
    } else if (Loader && Loader->getQualifiedNameAsString() ==
                             "torch::data::StatelessDataLoader") {
      Dataset = recordOf(templateTypeArgument(Loader, 0));
      Sampler = recordOf(templateTypeArgument(Loader, 1));
    } else {
      writtenTypes(Call, Dataset, Sampler);
      Stateful = isOrDerivesFrom(Dataset, "torch::data::datasets::"
                                          "StatefulDataset");
    }

    if (Stateful) {
      std::string Name =
          Dataset ? "'" + Dataset->getQualifiedNameAsString() + "' " : "";
      report(std::move(F), "stateful-dataset",
             "stateful dataset " + Name +
                 "has no indices to shard (ddp::make_data_loader rejects "
                 "it): keep torch::data::make_data_loader and split the data "
                 "inside the dataset by ddp::rank() and ddp::world_size()");
      return;
    }
    switch (classifySampler(Sampler)) {
    case SamplerKind::Distributed:
      noteLoaderFate(Loader, /*Converted=*/false);
      return; // Already sharded.
    case SamplerKind::Custom: {
      noteLoaderFate(Loader, /*Converted=*/false);
      std::string Name = Sampler->getQualifiedNameAsString();
      if (producesIndexVectors(Sampler))
        report(std::move(F), "custom-sampler",
               "custom sampler '" + Name +
                   "' is not sharded: if it yields the same indices on every "
                   "rank (deterministic, or random from torch's default "
                   "generator), use ddp::make_data_loader (training) or "
                   "ddp::make_eval_data_loader (evaluation), which shard "
                   "them; else split them inside it by ddp::rank() and "
                   "ddp::world_size()");
      else
        report(std::move(F), "custom-sampler",
               "sampler '" + Name +
                   "' does not yield index vectors, so ddp cannot shard it: "
                   "split the data inside the dataset or sampler by "
                   "ddp::rank() and ddp::world_size()");
      return;
    }
    case SamplerKind::Standard:
      break;
    }

    CurrentLoader = Loader && Loader->getQualifiedNameAsString() ==
                                  "torch::data::StatelessDataLoader"
                        ? Loader
                        : nullptr;
    LoaderUse Use = useOf(Call, /*Hops=*/0);
    std::vector<Finding> TypeEdits;
    for (const auto &[Spelling, Where] : Use.TypeSpellings) {
      Finding Edit =
          Locator.make(*Context, Spelling, "R4", "ddp-unsharded-loader");
      if (Edit.FilePath.empty() || Edit.InMacro) {
        Use.unfixableType(Where + (Edit.InMacro
                                       ? ", in macro '" + Edit.MacroName + "'"
                                       : ", outside the project"));
        break;
      }
      Edit.replaceRangeWith("ddp::DistributedDataLoader");
      Edit.Message = "torch's loader type, written out where a loader of "
                     "ddp::make_data_loader goes: use "
                     "'ddp::DistributedDataLoader' (same template arguments)";
      TypeEdits.push_back(std::move(Edit));
    }
    if (Use.TypeUnfixable) {
      noteLoaderFate(Loader, /*Converted=*/false);
      report(std::move(F), "loader-type-written",
             "the loader's type is written out where ddpify cannot rewrite "
             "it (" +
                 Use.TypeWhere +
                 ") and ddp::make_data_loader returns another one "
                 "(std::unique_ptr<ddp::DistributedDataLoader<Dataset, "
                 "Sampler>>): use auto or a template parameter there, then "
                 "run ddpify again");
      return;
    }
    if (Use.Drawn && !Use.Backward && !Use.TypeOnly) {
      keepUnsharded(std::move(F), Loader, Use);
      return;
    }
    // A call in a macro is not rewritten: neither are the types it reaches.
    if (!F.InMacro)
      for (Finding &Edit : TypeEdits)
        if (Seen.insert({Edit.FilePath, Edit.Offset}).second)
          Findings.push_back(std::move(Edit));
    noteLoaderFate(Loader, /*Converted=*/!F.InMacro);
    if (Use.TypeOnly) {
      // Both of ddp's functions return the same type.
      F.replaceRangeWith("ddp::make_data_loader");
      F.Message = "the type of torch's data loader: ddp::make_data_loader "
                  "returns the loader type the program now holds";
      Findings.push_back(std::move(F));
      return;
    }
    if (!Use.Backward && !Use.UnknownHere && !Use.Deferred.empty()) {
      decideInOtherUnits(std::move(F), Use);
      return;
    }
    bool Even = Use.Backward || Use.Unknown || !Use.Iterated;
    if (!Use.Backward && !Use.Unknown && !Use.Iterated)
      Use.unknown("it is never iterated here");
    F.replaceRangeWith(Even ? "ddp::make_data_loader"
                            : "ddp::make_eval_data_loader");
    F.Message = !Even ? exactShardsMessage("its batches never reach backward()")
                : Use.Backward
                    ? evenShardsMessage("its batches reach backward()")
                    : evenShardsMessage("where its batches go is not known");
    Finding Item = F;
    Findings.push_back(std::move(F));
    if (Use.Backward || !Use.Unknown) {
      // A new torch RandomSampler draws a new permutation; a new ddp loader
      // starts at epoch 0, whose permutation is the same every time. Only
      // training depends on the order.
      if (Use.Backward && Sampler &&
          Sampler->getQualifiedNameAsString() ==
              "torch::data::samplers::RandomSampler" &&
          madeRepeatedly(Call))
        report(std::move(Item), "loader-rebuilt",
               "this loader is made again on each pass of a loop (or by a "
               "function called in one), and a new ddp loader starts at "
               "epoch 0: at world size > 1 every pass draws the same "
               "shuffle, where the original drew a new one; build it once, "
               "before the loop, or call set_epoch(epoch) on it before "
               "iterating it");
      return;
    }
    report(std::move(Item), "loader-use-unknown",
           unknownUseReason(Use.UnknownWhy));
  }

  /// A loader whose batches are drawn one at a time through begin() and
  /// never reach backward() stays torch's: every rank draws the batches one
  /// process draws, so what is computed from them is the one-process value
  /// (each rank's first batch of an exact shard is another batch, and
  /// reducing over the ranks would measure N batches). R11 is told not to
  /// reduce the sums of a pass over it: every rank saw every sample.
  void keepUnsharded(Finding F, const CXXRecordDecl *Loader,
                     const LoaderUse &Use) {
    noteLoaderFate(Loader, /*Converted=*/false);
    for (const std::string &Holder : Use.Holders) {
      Finding Fact;
      Fact.RuleId = "R4";
      Fact.Provides = unshardedLoaderFact(Holder);
      Findings.push_back(std::move(Fact));
    }
    report(std::move(F), "loader-drawn",
           "this loader's batches are drawn one at a time through begin() "
           "(not in a pass to its end) and never reach backward(): it stays "
           "unsharded, so every rank draws the batches one process draws and "
           "the metrics computed from them are the one-process ones (an "
           "exact shard's first batch differs on each rank); its evaluation "
           "is not sped up. To shard it, evaluate in passes to its end and "
           "use ddp::make_eval_data_loader");
  }

  /// A loader whose fate the units that define the functions it is passed
  /// to decide: even shards where one of them trains on it, exact ones where
  /// each only evaluates it, else even with the report item. One edit per
  /// alternative, each kept by what the other units provide.
  void decideInOtherUnits(Finding F, const LoaderUse &Use) {
    std::vector<std::string> Trains, Evaluates;
    for (const std::string &Key : Use.Deferred) {
      Trains.push_back(trainsThroughKey(Key));
      Evaluates.push_back(evaluatesThroughKey(Key));
    }
    // Alternatives at one spot, adjacent: the run keeps the first of each
    // kind whose facts hold.
    auto Alternative = [&](llvm::StringRef NewName, std::string Message,
                           std::vector<std::string> Requires,
                           std::vector<std::string> Excludes) {
      Finding Edit = F;
      Edit.replaceRangeWith(NewName.str());
      Edit.Message = std::move(Message);
      Edit.Requires = std::move(Requires);
      Edit.Excludes = std::move(Excludes);
      Findings.push_back(std::move(Edit));
    };
    for (const std::string &Trained : Trains)
      Alternative("ddp::make_data_loader",
                  evenShardsMessage("its batches reach backward() in a "
                                    "function of another unit"),
                  {Trained}, {});
    for (const std::string &Evaluated : Evaluates)
      Alternative("ddp::make_data_loader",
                  evenShardsMessage("where its batches go is not known"), {},
                  {Evaluated});
    Alternative("ddp::make_eval_data_loader",
                exactShardsMessage("its batches never reach backward(), here "
                                   "or in the functions of other units it is "
                                   "passed to"),
                Evaluates, {});
    for (const std::string &Evaluated : Evaluates) {
      Finding Item = F;
      Item.Excludes = Trains;
      Item.Excludes.push_back(Evaluated);
      report(std::move(Item), "loader-use-unknown",
             unknownUseReason(Use.UnknownWhy));
    }
  }

  /// Whether Call runs again and again: in the body of a loop of its
  /// function, or its function (not main) is called in the body of a loop.
  bool madeRepeatedly(const CallExpr *Call) {
    const FunctionDecl *Function = nullptr;
    if (inLoopBody(DynTypedNode::create(*Call), Function))
      return true;
    if (!Function || Function->isMain())
      return false;
    for (const Expr *Callee : namesOf(Function).Uses) {
      const FunctionDecl *Caller = nullptr;
      if (const CallExpr *Outer = enclosingCall(Callee))
        if (inLoopBody(DynTypedNode::create(*Outer), Caller))
          return true;
    }
    return false;
  }

  /// Whether Node lies in the body of a loop of its function (Function: that
  /// function, null in a lambda).
  bool inLoopBody(DynTypedNode Node, const FunctionDecl *&Function) {
    for (DynTypedNode Parent = parentOf(Node); !Parent.getNodeKind().isNone();
         Node = Parent, Parent = parentOf(Parent)) {
      Function = Parent.get<FunctionDecl>();
      if (Function || Parent.get<LambdaExpr>())
        return false;
      const Stmt *Body = nullptr;
      if (const auto *For = Parent.get<ForStmt>())
        Body = For->getBody();
      else if (const auto *RangeFor = Parent.get<CXXForRangeStmt>())
        Body = RangeFor->getBody();
      else if (const auto *While = Parent.get<WhileStmt>())
        Body = While->getBody();
      else if (const auto *Do = Parent.get<DoStmt>())
        Body = Do->getBody();
      if (Body && Node.get<Stmt>() == Body)
        return true;
    }
    return false;
  }

  /// F as a report item: no edit, the reason and its id.
  void report(Finding F, llvm::StringRef Id, std::string Reason) {
    F.Edits.clear();
    F.ReportId = Id.str();
    F.NotRewrittenReason = Reason;
    F.Message = std::move(Reason);
    Findings.push_back(std::move(F));
  }

  /// The dataset and sampler types of a call left unresolved in a template:
  /// a written sampler template argument or sampler object, the dataset
  /// argument; null where dependent.
  void writtenTypes(const CallExpr *Call, const CXXRecordDecl *&Dataset,
                    const CXXRecordDecl *&Sampler) {
    if (Call->getNumArgs() >= 1)
      Dataset = recordOf(Call->getArg(0)->getType());
    if (Call->getNumArgs() >= 2) {
      const CXXRecordDecl *Second = recordOf(Call->getArg(1)->getType());
      if (isOrDerivesFrom(Second, "torch::data::samplers::Sampler")) {
        Sampler = Second;
        return;
      }
    }
    const auto *Lookup = dyn_cast<UnresolvedLookupExpr>(
        stripParensAndImplicit(Call->getCallee()));
    if (Lookup && Lookup->getNumTemplateArgs() >= 1 &&
        Call->getNumArgs() <= 2) {
      const TemplateArgument &First =
          Lookup->getTemplateArgs()[0].getArgument();
      if (First.getKind() == TemplateArgument::Type)
        Sampler = recordOf(First.getAsType());
    }
  }

  // --- Where the loader goes ---------------------------------------------

  DynTypedNode parentOf(const DynTypedNode &Node) {
    DynTypedNodeList Parents = Context->getParents(Node);
    return Parents.empty() ? DynTypedNode() : Parents[0];
  }

  /// Whether Outer is Inner behind implicit nodes and parentheses.
  static bool wraps(const Expr *Outer, const Expr *Inner) {
    return stripParensAndImplicit(Outer) == stripParensAndImplicit(Inner);
  }

  /// `*E` (a unique_ptr's operator*, or a pointer dereference).
  static bool isDerefOf(const Expr *Outer, const Expr *E) {
    if (const auto *Unary = dyn_cast<UnaryOperator>(Outer))
      return Unary->getOpcode() == UO_Deref && wraps(Unary->getSubExpr(), E);
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(Outer))
      return Op->getOperator() == OO_Star && Op->getNumArgs() == 1 &&
             wraps(Op->getArg(0), E);
    return false;
  }

  /// The unique_ptr E moved into another one: `std::move(E)`, or the
  /// constructor a `return E;` or a conversion goes through.
  static bool isMovedInto(const Expr *Outer, const Expr *E) {
    if (const auto *Call = dyn_cast<CallExpr>(Outer)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      return Callee && Call->getNumArgs() == 1 && wraps(Call->getArg(0), E) &&
             Callee->getQualifiedNameAsString() == "std::move";
    }
    const auto *Construct = dyn_cast<CXXConstructExpr>(Outer);
    const CXXRecordDecl *Record =
        Construct ? recordOf(Construct->getType()) : nullptr;
    return Record && Construct->getNumArgs() == 1 &&
           wraps(Construct->getArg(0), E) &&
           Record->getQualifiedNameAsString() == "std::unique_ptr";
  }

  /// What happens to the loader E (the call itself, or a reference to a
  /// variable holding it). Hops counts the functions already entered.
  LoaderUse useOf(const Expr *E, int Hops) {
    LoaderUse Use;
    const Expr *Cur = E;
    bool Dereferenced = false;
    DynTypedNode Parent = parentOf(DynTypedNode::create(*Cur));
    while (const auto *ParentExpr = Parent.get<Expr>()) {
      if (wraps(ParentExpr, Cur) ||
          (!Dereferenced && isMovedInto(ParentExpr, Cur))) {
        Cur = ParentExpr;
      } else if (!Dereferenced && isDerefOf(ParentExpr, Cur)) {
        Cur = ParentExpr;
        Dereferenced = true;
      } else {
        break;
      }
      Parent = parentOf(Parent);
    }

    // A range-for over it: `for (auto &batch : *loader)`.
    if (const CXXForRangeStmt *For = rangeForOver(Cur, Parent)) {
      Use.Iterated = true;
      Use.Backward = reachesBackward(For->getBody(), /*CallDepth=*/2);
      return Use;
    }
    if (const auto *Var = Parent.get<VarDecl>()) {
      if (Var->getInit() && wraps(Var->getInit(), Cur))
        return useOfVariable(Var, Hops);
      Use.unknown("it is used in a way ddpify does not follow");
      return Use;
    }
    if (Parent.get<ReturnStmt>())
      return returnedFrom(Parent, Hops);
    // A member initialiser (the parent map goes from it to the constructor).
    if (const auto *Constructor = Parent.get<CXXConstructorDecl>()) {
      for (const CXXCtorInitializer *Init : Constructor->inits())
        if (Init->isWritten() && Init->getMember() &&
            wraps(Init->getInit(), Cur))
          return heldBy(Init->getMember(), Hops);
      Use.unknown("it is used in a way ddpify does not follow");
      return Use;
    }
    if (const auto *Field = Parent.get<FieldDecl>()) {
      if (Field->getInClassInitializer() &&
          wraps(Field->getInClassInitializer(), Cur))
        return heldBy(Field, Hops);
      Use.unknown("it is used in a way ddpify does not follow");
      return Use;
    }
    if (Parent.get<DecltypeTypeLoc>()) {
      Use.TypeOnly = true;
      return Use;
    }
    const auto *ParentExpr = Parent.get<Expr>();
    if (!ParentExpr) {
      Use.unknown("it is used in a way ddpify does not follow");
      return Use;
    }
    if (const auto *Member = dyn_cast<MemberExpr>(ParentExpr))
      return memberUse(Member->getMemberDecl()->getNameAsString(), Member);
    if (const auto *Member = dyn_cast<CXXDependentScopeMemberExpr>(ParentExpr))
      return memberUse(Member->getMember().getAsString(), nullptr);
    if (const auto *Op = dyn_cast<CXXOperatorCallExpr>(ParentExpr)) {
      if (Op->getOperator() == OO_Arrow) {
        // `loader->begin()`: the arrow's result may be cast to a base first.
        DynTypedNode Above = parentOf(Parent);
        while (Above.get<Expr>() && !Above.get<MemberExpr>() &&
               wraps(Above.get<Expr>(), Op))
          Above = parentOf(Above);
        if (const auto *Member = Above.get<MemberExpr>())
          return memberUse(Member->getMemberDecl()->getNameAsString(), Member);
        Use.unknown("it is used in a way ddpify does not follow");
        return Use;
      }
      if (Op->getOperator() == OO_Equal && Op->getNumArgs() == 2) {
        if (wraps(Op->getArg(1), Cur))
          return assignedTo(Op->getArg(0), Hops);
        if (wraps(Op->getArg(0), Cur))
          return Use; // Overwritten: the new loader is followed on its own.
      }
    }
    if (const auto *Assign = dyn_cast<BinaryOperator>(ParentExpr)) {
      if (Assign->getOpcode() == BO_Assign && wraps(Assign->getRHS(), Cur))
        return assignedTo(Assign->getLHS(), Hops);
      if (Assign->getOpcode() == BO_Assign && wraps(Assign->getLHS(), Cur))
        return Use;
    }
    if (const auto *Call = dyn_cast<CallExpr>(ParentExpr))
      return passedTo(Call, Cur, Hops);
    Use.unknown("it is used in a way ddpify does not follow");
    return Use;
  }

  /// The range-for whose range is Cur (Parent is Cur's parent: the for
  /// itself, or the implicit `__range` variable's declaration).
  const CXXForRangeStmt *rangeForOver(const Expr *Cur, DynTypedNode Parent) {
    for (int Depth = 0; Depth < 3 && !Parent.getNodeKind().isNone(); ++Depth) {
      if (const auto *For = Parent.get<CXXForRangeStmt>())
        return For->getRangeInit() && wraps(For->getRangeInit(), Cur) ? For
                                                                      : nullptr;
      if (!Parent.get<VarDecl>() && !Parent.get<DeclStmt>())
        return nullptr;
      Parent = parentOf(Parent);
    }
    return nullptr;
  }

  /// A member of the loader used: Member is the member expression, null
  /// where it is dependent.
  LoaderUse memberUse(llvm::StringRef Name, const MemberExpr *Member) {
    LoaderUse Use;
    if (Name == "end")
      return Use; // Compared with, never read.
    if (Name == "begin" && Member) {
      const auto *Call =
          parentOf(DynTypedNode::create(*Member)).get<CXXMemberCallExpr>();
      if (Call && Call->getCallee() == Member)
        return iteratorUseOf(Call);
    }
    // The raw loader handed on: not followed.
    if (Name == "begin" || Name == "get" || Name == "release")
      Use.unknown("its " + Name.str() + "() is used");
    return Use;
  }

  /// The batches of the iterator `Begin` gives: a pass, as a range-for, or
  /// draws, whose batches reach backward() when the rest of the block of a
  /// draw does.
  LoaderUse iteratorUseOf(const CXXMemberCallExpr *Begin) {
    LoaderUse Use;
    IteratorUse Iterator = iteratorUse(*Context, Begin);
    switch (Iterator.K) {
    case IteratorUse::Pass:
      Use.Iterated = true;
      Use.Backward = reachesBackward(Iterator.Body, /*CallDepth=*/2);
      break;
    case IteratorUse::Draws:
      Use.Drawn = true;
      for (const Stmt *Region : Iterator.Regions)
        Use.Backward |= reachesBackward(Region, /*CallDepth=*/2);
      break;
    case IteratorUse::Count:
      // The number of batches a pass gives, which ddp's loader keeps equal
      // on every rank: a progress line's total, a schedule's steps per
      // epoch are this rank's (R11 counts every rank's batches where a sum
      // it makes global is divided by it).
      Use.Counted = true;
      break;
    case IteratorUse::Nothing:
      break;
    case IteratorUse::Unknown:
      Use.unknown(Iterator.Why);
      break;
    }
    return Use;
  }

  LoaderUse assignedTo(const Expr *Target, int Hops) {
    const Expr *Stripped = stripParensAndImplicit(Target);
    if (const auto *Ref = dyn_cast<DeclRefExpr>(Stripped))
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()))
        return useOfVariable(Var, Hops);
    if (const auto *Member = dyn_cast<MemberExpr>(Stripped))
      if (const auto *Field = dyn_cast<FieldDecl>(Member->getMemberDecl()))
        return heldBy(Field, Hops);
    LoaderUse Use;
    Use.unknown("it is stored in a member");
    return Use;
  }

  /// The loader held by member Field: its written type, and every use of the
  /// member in the translation unit when all of them are here (a class of
  /// the main file, not a template).
  LoaderUse heldBy(const FieldDecl *Field, int Hops) {
    LoaderUse Use;
    Use.Holders.push_back(loaderHolderKey(Field, *Context));
    std::string Name = "'" + Field->getNameAsString() + "'";
    noteWrittenType(Field->getTypeSourceInfo(), "member " + Name, Use);
    const auto *Record = dyn_cast<CXXRecordDecl>(Field->getParent());
    if (!Record || Record->isDependentContext() ||
        !Context->getSourceManager().isInMainFile(
            Context->getSourceManager().getExpansionLoc(
                Record->getLocation()))) {
      Use.unknown("it is stored in " + Name +
                  ", a member of a class other files may use");
      return Use;
    }
    if (!Following.insert(Field).second)
      return Use; // Already being followed, further up.
    NameUses Names = namesOf(Field);
    if (Names.Unresolved)
      Use.unknown("member " + Name + " is used in a template");
    for (const Expr *Member : Names.Uses)
      Use.merge(useOf(Member, Hops));
    Following.erase(Field);
    return Use;
  }

  /// The loader returned by the function whose return statement is Return:
  /// its written return type (every declaration), and the uses of its
  /// result at every call of it when all of them are here.
  LoaderUse returnedFrom(DynTypedNode Return, int Hops) {
    LoaderUse Use;
    DynTypedNode Node = parentOf(Return);
    while (!Node.getNodeKind().isNone() && !Node.get<FunctionDecl>() &&
           !Node.get<LambdaExpr>())
      Node = parentOf(Node);
    const auto *Function = Node.get<FunctionDecl>();
    if (!Function) {
      Use.unknown("it is returned from a lambda");
      return Use;
    }
    std::string Name = "'" + Function->getNameAsString() + "'";
    for (const FunctionDecl *Declaration : Function->redecls()) {
      const TypeSourceInfo *Info = Declaration->getTypeSourceInfo();
      FunctionTypeLoc Type = Declaration->getFunctionTypeLoc();
      if (!Info || !Type) {
        if (!Declaration->getReturnType()->getContainedDeducedType() &&
            namesStatelessLoader(Declaration->getReturnType()))
          Use.unfixableType("the return type of " + Name);
        continue;
      }
      noteWrittenType(Type.getReturnLoc(), Declaration->getReturnType(),
                      "the return type of " + Name, Use);
    }
    const SourceManager &SM = Context->getSourceManager();
    bool CalledOnlyHere = !Function->isExternallyVisible();
    if (!CalledOnlyHere) {
      CalledOnlyHere = true;
      for (const FunctionDecl *Declaration : Function->redecls())
        CalledOnlyHere &=
            SM.isInMainFile(SM.getExpansionLoc(Declaration->getLocation()));
    }
    if (!CalledOnlyHere)
      Use.unknown("it is returned from " + Name +
                  ", which other files may call");
    if (isa<CXXMethodDecl>(Function) &&
        cast<CXXMethodDecl>(Function)->isVirtual())
      Use.unknown("it is returned from virtual " + Name);
    if (!Following.insert(Function->getCanonicalDecl()).second)
      return Use; // Already being followed, further up.
    NameUses Names = namesOf(Function);
    if (Names.Unresolved)
      Use.unknown(Name + " is called in a template");
    bool Called = false;
    for (const Expr *Callee : Names.Uses) {
      const CallExpr *Call = enclosingCall(Callee);
      if (!Call) {
        Use.unknown("it is returned from " + Name +
                    ", which is used other than by a call");
        continue;
      }
      Called = true;
      Use.merge(useOf(Call, Hops));
    }
    if (!Called && !Use.Unknown)
      Use.unknown("it is returned from " + Name + ", which is not called here");
    Following.erase(Function->getCanonicalDecl());
    return Use;
  }

  /// The uses of Target in the project's code of this translation unit.
  NameUses namesOf(const NamedDecl *Target) {
    NameUses Names(Target);
    for (Decl *TopLevel : Context->getTranslationUnitDecl()->decls())
      if (isOurs(TopLevel->getLocation()))
        Names.TraverseDecl(TopLevel);
    return Names;
  }

  /// Records, in Use, the spellings of the loader's torch type in the type
  /// written at Where; a torch loader type there that cannot be respelled
  /// makes it unfixable. A deduced type (`auto`) follows the loader.
  void noteWrittenType(const TypeSourceInfo *Info, const std::string &Where,
                       LoaderUse &Use) {
    if (Info)
      noteWrittenType(Info->getTypeLoc(), Info->getType(), Where, Use);
  }
  void noteWrittenType(TypeLoc Written, QualType Type, const std::string &Where,
                       LoaderUse &Use) {
    if (Written.isNull() || Type->getContainedDeducedType())
      return;
    LoaderTypeSpellings Spellings(CurrentLoader);
    Spellings.TraverseTypeLoc(Written);
    for (SourceRange Spelling : Spellings.Spellings)
      Use.TypeSpellings.emplace_back(Spelling, Where);
    if (Spellings.Spellings.empty() && !Spellings.FollowsLoader &&
        namesStatelessLoader(Type))
      Use.unfixableType(Where);
  }

  /// Every use of a local variable (or parameter) holding the loader, or a
  /// reference to it, in its function.
  LoaderUse useOfVariable(const VarDecl *Var, int Hops) {
    LoaderUse Use;
    Use.Holders.push_back(loaderHolderKey(Var, *Context));
    noteWrittenType(Var->getTypeSourceInfo(),
                    "variable '" + Var->getNameAsString() + "'", Use);
    if (!Var->isLocalVarDecl() && !isa<ParmVarDecl>(Var)) {
      Use.unknown("it is stored in '" + Var->getNameAsString() + "'");
      return Use;
    }
    const auto *Function =
        dyn_cast_or_null<FunctionDecl>(Var->getParentFunctionOrMethod());
    const Stmt *Body = Function ? Function->getBody() : nullptr;
    if (!Body) {
      Use.unknown("it is held by '" + Var->getNameAsString() + "'");
      return Use;
    }
    llvm::SmallVector<const DeclRefExpr *, 8> Refs;
    llvm::SmallPtrSet<const Stmt *, 32> Visited;
    collectRefs(Body, Var, Refs, Visited);
    for (const DeclRefExpr *Ref : Refs)
      Use.merge(useOf(Ref, Hops));
    return Use;
  }

  static void collectRefs(const Stmt *S, const VarDecl *Var,
                          llvm::SmallVectorImpl<const DeclRefExpr *> &Refs,
                          llvm::SmallPtrSetImpl<const Stmt *> &Visited) {
    if (!S || !Visited.insert(S).second)
      return;
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S))
      if (Ref->getDecl() == Var)
        Refs.push_back(Ref);
    if (const auto *Lambda = dyn_cast<LambdaExpr>(S))
      collectRefs(Lambda->getBody(), Var, Refs, Visited);
    for (const Stmt *Child : S->children())
      collectRefs(Child, Var, Refs, Visited);
  }

  /// The loader passed as an argument of Call: followed into the callee's
  /// body when it belongs to the project.
  LoaderUse passedTo(const CallExpr *Call, const Expr *Arg, int Hops) {
    LoaderUse Use;
    unsigned Index = 0;
    bool Found = false;
    for (unsigned I = 0; I < Call->getNumArgs() && !Found; ++I)
      if (Call->getArg(I) == Arg || wraps(Call->getArg(I), Arg)) {
        Index = I;
        Found = true;
      }
    if (!Found) {
      Use.unknown("it is used in a way ddpify does not follow");
      return Use;
    }
    const FunctionDecl *Callee = calleeOf(Call);
    std::string Name =
        Callee ? "'" + Callee->getNameAsString() + "'" : "a function";
    if (Callee && isa<CXXOperatorCallExpr>(Call) &&
        isa<CXXMethodDecl>(Callee) &&
        !cast<CXXMethodDecl>(Callee)->isStatic()) {
      // operator() of a lambda or functor: argument 0 is the object.
      if (Index == 0) {
        Use.unknown("it is used in a way ddpify does not follow");
        return Use;
      }
      --Index;
    }
    const FunctionDecl *Definition = nullptr;
    const Stmt *Body = Callee ? Callee->getBody(Definition) : nullptr;
    if (!Body && Callee)
      if (const FunctionDecl *Pattern =
              Callee->getTemplateInstantiationPattern())
        Body = Pattern->getBody(Definition);
    if (!Body && Callee && Hops < 2 && isOurs(Callee->getLocation()) &&
        !Callee->isDependentContext() && Index < Callee->getNumParams()) {
      // Defined in another unit of the project: that unit says what the
      // parameter does with the loader (onEndOfTranslationUnit).
      noteParameterTypes(Callee, Index, Name, Use);
      Use.Holders.push_back("param:" + parameterKey(Callee, Index, *Context));
      Use.deferred(parameterKey(Callee, Index, *Context),
                   "it is passed to " + Name +
                       ", whose body is in a unit of the project not "
                       "migrated with this one, or whose use of it ddpify "
                       "does not follow");
      return Use;
    }
    if (!Body || !Definition || !isOurs(Definition->getLocation()) ||
        Hops >= 2) {
      Use.unknown("it is passed to " + Name +
                  ", whose body ddpify does not "
                  "follow");
      return Use;
    }
    if (Index >= Definition->getNumParams()) {
      Use.unknown("it is passed to " + Name + " through a parameter pack");
      return Use;
    }
    // The parameter's type as written, in every declaration: a template
    // parameter takes the new loader type, a written StatelessDataLoader
    // type is respelled.
    const FunctionDecl *Written = Definition;
    if (const FunctionDecl *Pattern =
            Definition->getTemplateInstantiationPattern())
      Written = Pattern;
    noteParameterTypes(Written, Index, Name, Use);
    const ParmVarDecl *Param = Definition->getParamDecl(Index);
    LoaderUse Inner = useOfVariable(Param, Hops + 1);
    if (!Inner.Iterated && !Inner.Counted && !Inner.Unknown)
      Inner.unknown("it is passed to " + Name + ", which does not iterate it");
    Use.merge(Inner);
    return Use;
  }

  /// The written type of Function's parameter Index, in every declaration.
  void noteParameterTypes(const FunctionDecl *Function, unsigned Index,
                          const std::string &Name, LoaderUse &Use) {
    for (const FunctionDecl *Declaration : Function->redecls())
      if (Index < Declaration->getNumParams()) {
        const ParmVarDecl *Param = Declaration->getParamDecl(Index);
        noteWrittenType(
            Param->getTypeSourceInfo(),
            "parameter '" + Param->getNameAsString() + "' of " + Name, Use);
      }
  }

  /// The record a loader type names (through a unique_ptr).
  static const CXXRecordDecl *loaderRecordOf(QualType Type) {
    const CXXRecordDecl *Record = recordOf(Type);
    if (Record && Record->getQualifiedNameAsString() == "std::unique_ptr")
      Record = recordOf(templateTypeArgument(Record, 0));
    return Record;
  }

  /// torch's StatelessDataLoader itself (or a unique_ptr of it), which ddp's
  /// loader derives from no specialization of: its bases
  /// (DataLoaderBase<...>) hold ddp's loader as they are.
  static bool namesStatelessLoader(QualType Type) {
    const CXXRecordDecl *Record = loaderRecordOf(Type);
    return Record && Record->getQualifiedNameAsString() ==
                         "torch::data::StatelessDataLoader";
  }

  // --- Does a statement reach backward()? --------------------------------

  /// Whether S calls `backward()` (a member such as Tensor::backward, or
  /// torch::autograd::backward), itself or, CallDepth calls deep, through
  /// the functions and lambdas of the project it calls.
  bool reachesBackward(const Stmt *S, int CallDepth) {
    llvm::SmallPtrSet<const Stmt *, 32> Visited;
    return reachesBackward(S, CallDepth, Visited);
  }

  bool reachesBackward(const Stmt *S, int CallDepth,
                       llvm::SmallPtrSetImpl<const Stmt *> &Visited) {
    if (!S || !Visited.insert(S).second)
      return false;
    if (const auto *Member = dyn_cast<CXXDependentScopeMemberExpr>(S))
      if (Member->getMember().getAsString() == "backward")
        return true;
    if (const auto *Member = dyn_cast<UnresolvedMemberExpr>(S))
      if (Member->getName().getAsString() == "backward")
        return true;
    if (const auto *Lookup = dyn_cast<UnresolvedLookupExpr>(S))
      if (Lookup->getName().getAsString() == "backward")
        return true;
    if (const auto *Call = dyn_cast<CallExpr>(S)) {
      const FunctionDecl *Callee = calleeOf(Call);
      if (Callee && Callee->getIdentifier() && Callee->getName() == "backward")
        return true;
      if (CallDepth > 0 && Callee) {
        const FunctionDecl *Definition = nullptr;
        const Stmt *Body = Callee->getBody(Definition);
        if (!Body)
          if (const FunctionDecl *Pattern =
                  Callee->getTemplateInstantiationPattern())
            Body = Pattern->getBody(Definition);
        if (Body && Definition && isOurs(Definition->getLocation()) &&
            reachesBackward(Body, CallDepth - 1, Visited))
          return true;
      }
    }
    if (const auto *Lambda = dyn_cast<LambdaExpr>(S))
      if (reachesBackward(Lambda->getBody(), CallDepth, Visited))
        return true;
    for (const Stmt *Child : S->children())
      if (reachesBackward(Child, CallDepth, Visited))
        return true;
    return false;
  }

  /// Code of the project (under the root, not a system header).
  bool isOurs(SourceLocation Loc) {
    return !Locator.make(*Context, SourceRange(Loc, Loc), "", "")
                .FilePath.empty();
  }

  FindingList &Findings;
  FindingLocator Locator;
  ASTContext *Context = nullptr;
  std::set<std::pair<std::string, unsigned>> Seen;
  /// The torch loader type of the call being followed (null when unknown).
  const CXXRecordDecl *CurrentLoader = nullptr;
  /// The members and functions whose uses are being followed (a cycle ends).
  llvm::SmallPtrSet<const Decl *, 8> Following;
};

const RuleInfo ShardLoadersRows[] = {
    {"R4", "ddp-unsharded-loader",
     "torch::data::make_data_loader becomes ddp::make_data_loader (even "
     "shards for loaders reaching backward, exact ones otherwise)",
     CheckLevel::RewriteUntilDistributed},
};
} // namespace

extern const RuleUnit ShardLoaders{ShardLoadersRows,
                                   createModule<DataMatchers>};

} // namespace ddpify
