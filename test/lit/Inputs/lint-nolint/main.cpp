// Input of lint-nolint.test: NOLINT comments as clang-tidy reads them.
#include <torch/torch.h>

torch::Tensor plain(torch::Tensor t) {
  return t.cuda(); // NOLINT
}

torch::Tensor named(torch::Tensor t) {
  return t.cuda(); // NOLINT(ddp-cuda-call)
}

torch::Tensor glob(torch::Tensor t) {
  return t.cuda(); // NOLINT(ddp-*)
}

torch::Tensor spaced(torch::Tensor t) {
  return t.cuda(); // NOLINT(  bugprone-foo , ddp-cuda-call )
}

torch::Tensor other_check(torch::Tensor t) {
  return t.cuda(); // NOLINT(ddp-hardcoded-device)
}

torch::Tensor next_line(torch::Tensor t) {
  // NOLINTNEXTLINE(ddp-cuda-call)
  return t.cuda();
}

torch::Tensor next_line_other(torch::Tensor t) {
  // NOLINTNEXTLINE(ddp-hardcoded-device)
  return t.cuda();
}

torch::Tensor next_line_too_far(torch::Tensor t) {
  // NOLINTNEXTLINE(ddp-cuda-call)

  return t.cuda();
}

// NOLINTBEGIN(ddp-cuda-call)
torch::Tensor region_a(torch::Tensor t) { return t.cuda(); }
torch::Tensor region_b(torch::Tensor t) { return t.cuda(); }
// NOLINTEND(ddp-cuda-call)

torch::Tensor after_region(torch::Tensor t) { return t.cuda(); }

// NOLINTBEGIN(ddp-hardcoded-device)
torch::Tensor region_other(torch::Tensor t) { return t.cuda(); }
// NOLINTEND(ddp-hardcoded-device)

torch::Tensor negated(torch::Tensor t) {
  return t.cuda(); // NOLINT(ddp-*,-ddp-cuda-call)
}

int main() {
  torch::Device device(torch::kCUDA); // NOLINT(ddp-cuda-call)
  torch::Device quiet(torch::kCUDA);  // NOLINT(ddp-hardcoded-device)
  return device == quiet ? 0 : 1;
}
