//===- Findings.cpp - One program's findings, as the tool and tidy see them
//===//

#include "ddpify/Finding.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>

namespace ddpify {

void dropUnmetRequirements(FindingList &Findings) {
  llvm::StringSet<> Provided;
  for (const Finding &F : Findings)
    if (!F.Provides.empty())
      Provided.insert(F.Provides);
  llvm::erase_if(Findings, [&](const Finding &F) {
    return llvm::any_of(F.Requires,
                        [&](const std::string &Key) {
                          return !Provided.contains(Key) ||
                                 Provided.contains("!" + Key);
                        }) ||
           llvm::any_of(F.Excludes, [&](const std::string &Key) {
             return Provided.contains(Key);
           });
  });
}

void mergeSameSpots(FindingList &Findings) {
  std::stable_sort(Findings.begin(), Findings.end());
  Findings.erase(std::unique(Findings.begin(), Findings.end(),
                             [](const Finding &A, const Finding &B) {
                               return A.sameSpot(B);
                             }),
                 Findings.end());
}

} // namespace ddpify
