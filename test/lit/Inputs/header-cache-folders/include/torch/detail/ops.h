#pragma once
namespace torch {
inline int library_ops() { return 1; }
} // namespace torch
