// Parses only with the stddef.h of <bin>/../lib/clang/19 of an installed ddpify.
#include <stddef.h>

#ifndef DDPIFY_INSTALLED_RESOURCE_DIR
#error stddef.h did not come from <bin>/../lib/clang/19
#endif

size_t answer = 42;
