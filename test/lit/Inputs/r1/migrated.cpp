// Input of R1.test: already migrated (ddp::init not first): left alone.
#include <ddp/ddp.h>
#include <torch/torch.h>

int main(int argc, char **argv) {
  torch::manual_seed(1);
  ddp::init(argc, argv);
  return 0;
}
