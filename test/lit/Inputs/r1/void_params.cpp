// Input of R1.test: main(void), body on the brace's line.
#include <torch/torch.h>

int main(void) { return torch::ones({1}).size(0) - 1; }
