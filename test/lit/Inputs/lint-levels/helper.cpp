// No main in this run: whether the program is distributed is not known, so
// only what is never a hazard is folded.
#include <torch/torch.h>

#include <iostream>

torch::Tensor to_gpu(torch::Tensor t) {
  std::cout << "moving" << std::endl;
  return t.cuda();
}
