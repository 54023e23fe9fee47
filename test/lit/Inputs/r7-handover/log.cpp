#include "log.h"

Logger::Logger(std::ostream &out) : out_(out) {}

void Logger::epoch(int epoch, double loss) {
  out_ << "epoch " << epoch << " loss " << loss << '\n';
}

void Progress::step(int step) { *out_ << "step " << step << '\n'; }

void print_summary(std::ostream &out, double loss) {
  out << "final loss " << loss << std::endl;
}
