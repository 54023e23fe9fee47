// Input of gcc-headers.test: built with -fopenmp, so LibTorch's headers
// include <omp.h> (ATen/ParallelOpenMP.h), and so does the program.
#include <torch/torch.h>

#include <omp.h>

int main() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor x = torch::ones({2, 2}).cuda();
  return omp_get_max_threads() > 0 && x.size(0) == 2 ? 0 : 1;
}
