#include "log.h"

Logger::Logger(const std::string &path) : file_(path) {
  if (!file_)
    std::cerr << "cannot write " << path << '\n';
}
