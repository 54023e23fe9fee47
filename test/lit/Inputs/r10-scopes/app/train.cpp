#include "report.h"

// Training lives in a unit not parsed here.
void train_elsewhere();

int main() {
  report(1);
  train_elsewhere();
  return 0;
}
