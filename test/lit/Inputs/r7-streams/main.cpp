// Input of R7-streams.test: output through streams bound to std::cout.
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

// A parameter some caller binds to std::cout.
void print_metrics(std::ostream &os, int epoch, double loss) {
  os << "epoch " << epoch << " loss " << loss << '\n';
}

// Handed on: the parameter of a function that gets one bound to std::cout.
void summary(std::ostream &out, double loss) {
  print_metrics(out, 0, loss);
  out << "done\n";
}

// A logger that keeps the stream in a member.
class Logger {
public:
  explicit Logger(std::ostream &stream) : stream_(stream) {}
  void log(const std::string &line) { stream_ << "[log] " << line << '\n'; }

private:
  std::ostream &stream_;
};

// A pointer member set in the body.
struct Progress {
  std::ostream *out = &std::cout;
  void tick(int step) { *out << "step " << step << '\r'; }
};

// Only ever a string stream: not output.
std::string describe(int epoch) {
  std::ostringstream text;
  text << "model-" << epoch;
  return text.str();
}
void fill(std::ostream &os, int epoch) { os << "epoch" << epoch; }

int main(int argc, char **argv) {
  bool verbose = argc > 1;
  std::ofstream null_stream;
  std::ostream &out = verbose ? std::cout : null_stream;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  Logger logger(std::cout);
  Progress progress;
  for (int epoch = 0; epoch < 2; ++epoch) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::ones({2, 4})).sum();
    loss.backward();
    optimizer.step();
    out << "epoch " << epoch << '\n';
    print_metrics(std::cout, epoch, loss.item<double>());
    logger.log("stepped");
    progress.tick(epoch);
    std::ostringstream name;
    fill(name, epoch);
    std::ofstream file(describe(epoch) + ".txt");
    print_metrics(file, epoch, loss.item<double>());
  }
  summary(std::cout, 0.5);
  return 0;
}
