#include <torch/torch.h>

int main() { return torch::ones({2}).cuda().defined() ? 0 : 1; }
