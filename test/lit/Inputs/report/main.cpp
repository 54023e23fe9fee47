// Report items without LibTorch: R7 output written by macros.
#include <cstdio>
#include <iostream>

#define SAY(x) std::cout << x << '\n'
#define SHOUT(x)                                                               \
  do {                                                                         \
    std::cout << x << "!\n";                                                   \
  } while (0)

int main() {
  std::cout << "start\n";
  SAY("in a macro");
  for (int i = 0; i < 2; ++i)
    SHOUT(i);
  std::puts("done"); SAY("twice on one line");
  return 0;
}

// Training lives in a unit not parsed here: the program may train (one
// that trains nothing is left as it is).
void train_elsewhere();
void run_training() { train_elsewhere(); }
