//===- IncludeInserter.cpp - R9: #include <ddp/ddp.h> ---------------------===//

#include "ddpify/IncludeInserter.h"
#include "clang/Format/Format.h"
#include "clang/Tooling/Inclusions/HeaderIncludes.h"

namespace ddpify {

std::optional<clang::tooling::Replacement>
runtimeIncludeInsertion(llvm::StringRef FilePath, llvm::StringRef Code) {
  clang::tooling::HeaderIncludes Includes(
      FilePath, Code, clang::format::getLLVMStyle().IncludeStyle);
  // insert() answers nothing when the header is already included.
  return Includes.insert("ddp/ddp.h", /*IsAngled=*/true,
                         clang::tooling::IncludeDirective::Include);
}

} // namespace ddpify
