// Parses only when DDPIFY_TEST_FLAG comes from the compile command, and
// Clang's builtin headers are found.
#include <cstddef>
#include <stddef.h>

#ifndef DDPIFY_TEST_FLAG
#error DDPIFY_TEST_FLAG is not defined: the compile command was not used
#endif

int main() { return static_cast<int>(sizeof(std::size_t) - sizeof(size_t)); }
