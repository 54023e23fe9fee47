#ifndef HELPERS_H
#define HELPERS_H

// No #include of its own: it relies on its includer for torch.
inline torch::Tensor ones_on_gpu() { return torch::ones({2}, torch::kCUDA); }

#endif
