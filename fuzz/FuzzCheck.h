//===- FuzzCheck.h - what a fuzz target asserts -----------------*- C++ -*-===//
//
// A property a fuzz target checks of the code it fuzzes, on every input:
// unlike assert() it holds in every build, and a violation aborts, which
// libFuzzer reports as a crash with the input that broke it.
//
//===----------------------------------------------------------------------===//

#ifndef DDPIFY_FUZZ_FUZZCHECK_H
#define DDPIFY_FUZZ_FUZZCHECK_H

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(Condition)                                                  \
  do {                                                                         \
    if (!(Condition)) {                                                        \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__,         \
                   __LINE__, #Condition);                                      \
      std::abort();                                                            \
    }                                                                          \
  } while (false)

#endif // DDPIFY_FUZZ_FUZZCHECK_H
