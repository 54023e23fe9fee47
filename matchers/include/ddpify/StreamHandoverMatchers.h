//===- StreamHandoverMatchers.h - R7: std::cout handed on --------*- C++
//-*-===//
//
// `std::cout` handed to code of another file that prints through the
// `std::ostream&` it is given becomes `ddp::output_stream(std::cout)`.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_STREAMHANDOVERMATCHERS_H
#define DDPIFY_STREAMHANDOVERMATCHERS_H

#include "ddpify/Registry.h"

namespace ddpify {

std::unique_ptr<MatcherModule>
createStreamHandoverMatchers(FindingList &Findings,
                             llvm::StringRef ProjectRoot);

} // namespace ddpify

#endif // DDPIFY_STREAMHANDOVERMATCHERS_H
