// A logger of its own file: it prints through the stream it is given.
#pragma once
#include <ostream>
#include <string>

class Logger {
public:
  explicit Logger(std::ostream &out);
  void metric(const std::string &tag, int index, const std::string &name,
              double value);
  void line(const std::string &text);

private:
  std::ostream &out_;
};
