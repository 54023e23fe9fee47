#pragma once
#include <torch/torch.h>

const int64_t kFeatures = 8;
const int64_t kClasses = 3;

// Noisy feature vectors of three "shapes": class c raises features c and
// c + 3 and lowers feature 7 - c.
class ShapesDataset : public torch::data::datasets::Dataset<ShapesDataset> {
public:
  explicit ShapesDataset(int64_t count);
  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

private:
  torch::Tensor features_, labels_;
};
