#pragma once
#include <fstream>
#include <iostream>
#include <string>

// Every metrics line goes to the terminal and to the run's log file.
class Logger {
public:
  explicit Logger(const std::string &path);

  void line(const std::string &text) {
    std::cout << text << '\n';
    file_ << text << '\n';
  }

private:
  std::ofstream file_;
};
