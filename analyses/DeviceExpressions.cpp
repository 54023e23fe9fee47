//===- DeviceExpressions.cpp - What a device expression says --------------===//

#include "ddpify/DeviceExpressions.h"
#include "clang/AST/Type.h"

using namespace clang;

namespace ddpify::devices {

const Expr *strip(const Expr *E) {
  return E ? E->IgnoreUnlessSpelledInSource()->IgnoreParens() : nullptr;
}

bool isRecordNamed(QualType Type, llvm::StringRef QualifiedName) {
  const auto *Record =
      Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == QualifiedName;
}

bool isDeviceTypeEnum(QualType Type) {
  const auto *Enum =
      Type.getNonReferenceType().getCanonicalType()->getAs<EnumType>();
  return Enum &&
         Enum->getDecl()->getQualifiedNameAsString() == "c10::DeviceType";
}

bool isDeviceTypeConstant(const Expr *E, llvm::StringRef Kind) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(strip(E));
  if (!Ref)
    return false;
  std::string Name = Ref->getDecl()->getQualifiedNameAsString();
  return Name == ("c10::k" + Kind).str() ||
         Name == ("c10::DeviceType::" + Kind).str();
}

bool isDeviceString(const Expr *E, llvm::StringRef Prefix) {
  E = strip(E);
  if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E))
    E = strip(Cast->getSubExpr());
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E))
    if (Construct->getNumArgs() >= 1)
      E = strip(Construct->getArg(0));
  const auto *Literal = dyn_cast_or_null<StringLiteral>(E);
  return Literal && Literal->isOrdinary() &&
         Literal->getString().starts_with(Prefix);
}

const CXXConstructExpr *explicitDeviceConstruction(const Expr *E) {
  E = strip(E);
  if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E))
    E = Cast->getSubExpr()->IgnoreImplicit();
  const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E);
  if (!Construct || !isRecordNamed(Construct->getType(), "c10::Device") ||
      Construct->getNumArgs() == 0)
    return nullptr;
  return Construct;
}

bool isCudaDevice(const Expr *E) {
  if (isDeviceTypeConstant(E, "CUDA") || isDeviceString(E, "cuda"))
    return true;
  if (const CXXConstructExpr *Construct = explicitDeviceConstruction(E))
    return isDeviceTypeConstant(Construct->getArg(0), "CUDA") ||
           isDeviceString(Construct->getArg(0), "cuda");
  return false;
}

bool isCpuDevice(const Expr *E) {
  if (isDeviceTypeConstant(E, "CPU") || isDeviceString(E, "cpu"))
    return true;
  if (const CXXConstructExpr *Construct = explicitDeviceConstruction(E))
    return isDeviceTypeConstant(Construct->getArg(0), "CPU") ||
           isDeviceString(Construct->getArg(0), "cpu");
  return false;
}

std::string replacedSpotKey(const std::string &FilePath, unsigned Offset,
                            unsigned Length) {
  return "device-expression:" + FilePath + ":" + std::to_string(Offset) + ":" +
         std::to_string(Length);
}

void keepOutermostFindings(FindingList &Findings) {
  auto Contains = [](const Finding &Outer, const Finding &Inner) {
    return Outer.FilePath == Inner.FilePath && !Outer.InMacro &&
           !Inner.InMacro && Outer.Offset <= Inner.Offset &&
           Inner.Offset + Inner.Length <= Outer.Offset + Outer.Length;
  };
  FindingList Kept;
  for (size_t I = 0; I < Findings.size(); ++I) {
    bool Drop = false;
    for (size_t J = 0; J < Findings.size() && !Drop; ++J) {
      if (I == J || !Contains(Findings[J], Findings[I]))
        continue;
      bool SameRange = Findings[J].Offset == Findings[I].Offset &&
                       Findings[J].Length == Findings[I].Length;
      Drop = !SameRange || J < I;
    }
    if (!Drop)
      Kept.push_back(Findings[I]);
  }
  Findings = std::move(Kept);
}

} // namespace ddpify::devices
