// Input of R1.test: no main here; a function named init is not ddp::init.
#include <torch/torch.h>

namespace app {
int main(int argc) { return argc; }
} // namespace app

int run(int argc, char **argv) { return argc + (argv != nullptr); }
