#pragma once
#include <c10/macros/Macros.h>
namespace at {
struct Tensor {
  Tensor cuda() const { return *this; }
};
} // namespace at
namespace torch {
using at::Tensor;
} // namespace torch
