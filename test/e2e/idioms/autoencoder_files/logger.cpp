#include "logger.h"

#include <cstdio>

Logger::Logger(std::ostream &out) : out_(out) {}

void Logger::metric(const std::string &tag, int index, const std::string &name,
                    double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", value);
  out_ << tag << ' ' << index << ' ' << name << ' ' << text << '\n';
}

void Logger::line(const std::string &text) { out_ << text << std::endl; }
