// Input of R7.test: statements writing to stdout.
#include <ddp/ddp.h>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

#define LOG(x) std::cout << x << '\n'
#define EPOCHS 3

template <typename T> void report(T value, int step) {
  std::printf("\rstep %d value %f", step, static_cast<double>(value));
  std::cout << "step " << step << '\n';
}

int main(int argc, char **argv) {
  ddp::init(argc, argv);
  auto loss = torch::ones({1});
  for (int epoch = 0; epoch < EPOCHS; ++epoch) {
    std::cout << "epoch " << epoch << " loss " << loss.item<float>()
              << std::endl;
    std::cout << "progress\r" << std::flush;
    printf("%d\n", epoch);
    if (epoch % 2 == 0)
      std::printf("even\n");
    for (int i = 0; i < 2; ++i)
      puts("line");
    if (epoch == 1)
      std::cout << "one\n";
    else
      std::cout << "not one\n";
    std::putchar('\n');
    fprintf(stdout, "to stdout %d\n", epoch);
    std::cout << "epochs " << EPOCHS << '\n';
  }
  report(loss.item<float>(), 1);
  auto print = [&](float value) { std::cout << value << std::endl; };
  print(1.0f);
  // Negatives: stderr, already guarded, not a whole statement, macros.
  std::cerr << "warning on every rank\n";
  fprintf(stderr, "error on every rank\n");
  if (ddp::is_main_process())
    std::cout << "guarded\n";
  if (ddp::rank() == 0) {
    std::printf("guarded too\n");
    auto nested = [] { std::cout << "inside a guarded lambda\n"; };
    nested();
  }
  int written = std::printf("counted\n");
  LOG("in a macro");
  std::cout.flush();
  // Only the stream's format: nothing printed, no guard; with a value: output.
  std::cout << std::fixed << std::hex;
  std::cout.precision(4);
  std::cout << std::scientific << written << std::endl;
  return written > 0 ? 0 : 1;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
