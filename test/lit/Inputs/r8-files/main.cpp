// Input of R8-files.test: files a program writes other than its checkpoints.
#include <ddp/ddp.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

namespace fs = std::filesystem;

// The program's own writer: its stream goes through ddp::output_path, so it
// may run on every rank.
void write_csv(const std::string &path, const std::vector<float> &losses) {
  std::ofstream out(path);
  if (!out) {
    std::cerr << "cannot write " << path << '\n';
    return;
  }
  for (size_t i = 0; i < losses.size(); ++i)
    out << i << ',' << losses[i] << '\n';
}

void append_line(const char *path, float value) {
  FILE *log = std::fopen(path, "a");
  std::fprintf(log, "%f\n", value);
  std::fclose(log);
}

int main(int argc, char **argv) {
  const fs::path dir = "results";
  fs::create_directories(dir);
  if (!fs::exists(dir / "images"))
    fs::create_directory(dir / "images");
  std::ofstream log(dir / "log.txt", std::ios::app);
  std::ofstream later;
  later.open("later.txt");
  FILE *raw = fopen("raw.bin", "wb");
  std::fclose(raw);
  std::vector<float> losses{0.5f, 0.25f};
  write_csv((dir / "losses.csv").string(), losses);
  append_line("values.txt", 1.0f);
  torch::jit::script::Module scripted = torch::jit::load("scripted.pt");
  scripted.save("scripted-copy.pt");
  // Negatives: files read (also read back after writing), streams already
  // under the main-process check, a path already migrated.
  std::ifstream in("config.txt");
  FILE *config = std::fopen("config.txt", "r");
  FILE *scratch = std::fopen("scratch.bin", "w+");
  std::fclose(config);
  std::fclose(scratch);
  if (ddp::is_main_process()) {
    std::ofstream guarded("guarded.txt");
    guarded << "once\n";
  }
  std::ofstream migrated(ddp::output_path("migrated.txt"));
  std::fstream both("both.txt", std::ios::in | std::ios::out);
  return 0;
}

// Builds an optimizer: the program trains (one that trains nothing is left
// as it is).
void build_optimizer() {
  torch::optim::SGD optimizer(std::vector<torch::Tensor>{}, 0.1);
}
