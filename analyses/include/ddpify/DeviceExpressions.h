//===- DeviceExpressions.h - What a device expression says ------*- C++ -*-===//
//
// How a program spells a device (torch::kCUDA, "cuda:0",
// torch::Device(torch::kCUDA, 1)), shared by the rules that replace a CUDA
// device chosen by hand (rules/HardcodedDevice.cpp, rules/CudaCalls.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_DEVICEEXPRESSIONS_H
#define DDPIFY_DEVICEEXPRESSIONS_H

#include "ddpify/Finding.h"
#include "clang/AST/Expr.h"
#include "clang/AST/ExprCXX.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace ddpify::devices {

/// What migrated code says for "this process's device".
constexpr const char *ProcessDeviceExpr = "ddp::device()";

/// What the source spells: no implicit nodes, no parentheses.
const clang::Expr *strip(const clang::Expr *E);
/// A class type with that qualified name, through references.
bool isRecordNamed(clang::QualType Type, llvm::StringRef QualifiedName);
/// `c10::DeviceType`, through references.
bool isDeviceTypeEnum(clang::QualType Type);
/// `torch::kCUDA`, `at::kCUDA`, `c10::DeviceType::CUDA`; with Kind "CPU" the
/// CPU spellings.
bool isDeviceTypeConstant(const clang::Expr *E, llvm::StringRef Kind);
/// A string literal naming a device, e.g. "cuda:0" (Prefix "cuda").
bool isDeviceString(const clang::Expr *E, llvm::StringRef Prefix);
/// The explicit `torch::Device(...)` construction in E, if E is one.
const clang::CXXConstructExpr *explicitDeviceConstruction(const clang::Expr *E);
/// kCUDA, "cuda...", or torch::Device(kCUDA[, i]) / torch::Device("cuda:i").
bool isCudaDevice(const clang::Expr *E);
/// The same for the CPU.
bool isCpuDevice(const clang::Expr *E);

/// The key a finding that replaces a device expression provides
/// (Finding::Provides) and a finding inside that expression excludes: the
/// rewrite of the whole expression wins over one of its parts.
std::string replacedSpotKey(const std::string &FilePath, unsigned Offset,
                            unsigned Length);

/// One edit per spot among one rule's findings: a finding inside another is
/// dropped, and of two at one spot the first is kept. Findings in macros are
/// kept (they are reported, not rewritten).
void keepOutermostFindings(FindingList &Findings);

} // namespace ddpify::devices

#endif // DDPIFY_DEVICEEXPRESSIONS_H
