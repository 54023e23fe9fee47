// Input of lint-notes-formats.test: one device mismatch, two notes.
#include <torch/torch.h>

torch::Tensor add(torch::Tensor t) {
  auto gpu = t.cuda();
  auto cpu = torch::zeros({2});
  return gpu + cpu;
}
