// A stand-in for LibTorch's entry header, small enough to precompile in a
// moment: this test is about when the cache is reused, not about LibTorch.
#pragma once
namespace at {
struct Tensor {
  Tensor cuda() const { return *this; }
};
} // namespace at
namespace torch {
using at::Tensor;
} // namespace torch
