//===- MetricsRewriter.cpp - R11 edits ------------------------------------===//
//
// One statement per accumulator, each on its own line after the loader
// loop, indented like the loop. F.Names holds "name:kind" (see
// FindingForm::MetricReduce): double and int64 go straight through
// ddp::all_reduce's overloads, other integers through int64_t, other floating
// types through double, a tensor and a container of numbers (per-class
// counts) in place.
//
//===----------------------------------------------------------------------===//

#include "ddpify/Rewriter.h"

namespace ddpify {

namespace {

std::string reduceStatement(llvm::StringRef Entry) {
  auto [Name, Kind] = Entry.split(':');
  if (Name.empty() || Kind.empty())
    return "";
  std::string Var = Name.str();
  if (Kind == "tensor" || Kind == "elements")
    return "ddp::all_reduce(" + Var + ");";
  if (Kind == "double" || Kind == "int64")
    return Var + " = ddp::all_reduce(" + Var + ");";
  auto [Family, Type] = Kind.split(':');
  if (Type.empty())
    return "";
  llvm::StringRef Wide = Family == "int"     ? "int64_t"
                         : Family == "float" ? "double"
                                             : "";
  if (Wide.empty())
    return "";
  return Var + " = static_cast<" + Type.str() +
         ">(ddp::all_reduce(static_cast<" + Wide.str() + ">(" + Var + ")));";
}

} // namespace

std::vector<clang::tooling::Replacement>
rewriteMetricsFinding(const Finding &F) {
  if (F.Form != FindingForm::MetricReduce || F.Names.empty())
    return {};
  std::string Text;
  for (const std::string &Entry : F.Names) {
    std::string Statement = reduceStatement(Entry);
    if (Statement.empty())
      return {}; // A malformed finding: no partial edit.
    Text += "\n" + F.Indent + Statement;
  }
  return {clang::tooling::Replacement(F.FilePath, F.Offset, 0, Text)};
}

} // namespace ddpify
