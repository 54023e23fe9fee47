// A sanitizer build's own test (scripts/test.sh --sanitize): each mode makes
// one bug the build must report, so that a build whose sanitizers are off,
// or whose reports do not end the process, fails here instead of passing
// everything else unchecked.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// Opaque to the optimiser, so each bug happens at run time.
volatile int g_index = 8;
volatile int g_big = INT_MAX;
void *volatile g_kept = nullptr;
volatile int g_result = 0;

int heap_overflow() {
  char *bytes = new char[8];
  char copy[16] = {};
  std::memset(bytes, 0, 8);
  std::memcpy(copy, bytes, g_index + 1); // one byte past the end
  delete[] bytes;
  return copy[0];
}

int signed_overflow() {
  const int big = g_big;
  return big + 1;
}

int leak() {
  g_kept = std::malloc(64);
  g_kept = nullptr;
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "heap-overflow") {
    return heap_overflow();
  }
  if (mode == "signed-overflow") {
    g_result = signed_overflow();
    return 0;
  }
  if (mode == "leak") {
    return leak();
  }
  if (mode == "clean") {
    return 0;
  }
  std::fprintf(stderr, "usage: %s heap-overflow|signed-overflow|leak|clean\n",
               argv[0]);
  return 2;
}
