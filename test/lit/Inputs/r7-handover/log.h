// A logger and helpers of their own file, printing through the stream they
// are given.
#pragma once
#include <ostream>

class Logger {
public:
  explicit Logger(std::ostream &out);
  void epoch(int epoch, double loss);

private:
  std::ostream &out_;
};

class Progress {
public:
  explicit Progress(std::ostream *out) : out_(out) {}
  void step(int step);

private:
  std::ostream *out_;
};

void print_summary(std::ostream &out, double loss);
