#include "report.h"

void train_elsewhere();

int main() {
  report(2);
  train_elsewhere();
  return 0;
}
