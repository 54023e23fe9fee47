#pragma once

// ddp::RowShard: full-batch training sharded by rows, exactly.
//
// Many small programs feed the whole training tensor to the model every
// step (a regression on a CSV, a classifier on a few thousand rows). Under
// N ranks each rank takes a contiguous block of the rows once, before the
// loop, and weights its loss so that the gradient DistributedDataParallel
// averages is the one-process gradient, also when the rows do not divide by
// N (6001 rows on 2 ranks: 3001 and 3000; the plain average of two shard
// means is not the mean, the average of means weighted by their shares is):
//
//   ddp::RowShard rows(x.size(0));
//   x = rows.of(x);
//   y = rows.of(y);
//   for (...) {
//     auto loss = torch::mse_loss(model->forward(x), y);      // a mean
//     rows.mean_weighted(loss).backward();                    // * N n_r / n
//     optimizer.step();
//     std::cout << rows.global_mean(loss).item<float>();     // all ranks
//   }
//
// A loss that is a sum over rows is weighted by N (sum_weighted); a printed
// sum (a count of correct rows) is global_sum. At world size 1, and where
// there are fewer rows than ranks (every rank then keeps them all and
// nothing is weighted), every call leaves its argument as it is.

#include <torch/types.h>

#include <cstdint>

namespace ddp {

class RowShard {
public:
  /// This process's share of `total_rows` rows: a contiguous block, the
  /// blocks' sizes differing by at most one, in rank order.
  explicit RowShard(int64_t total_rows);

  int64_t total_rows() const { return total_; }
  /// The first row of this process's block, and its number of rows.
  int64_t begin() const { return begin_; }
  int64_t count() const { return count_; }
  /// Whether the rows are really split (world size > 1, enough rows).
  bool is_sharded() const { return sharded_; }

  /// `tensor`'s rows of this block (a view along dimension 0); its size
  /// there must be total_rows().
  torch::Tensor of(const torch::Tensor& tensor) const;

  /// N * count / total: makes a mean over this block's rows count for its
  /// share in the ranks' average of gradients.
  double mean_weight() const;
  /// N: the same for a sum over rows.
  double sum_weight() const;
  torch::Tensor mean_weighted(const torch::Tensor& local_mean) const;
  torch::Tensor sum_weighted(const torch::Tensor& local_sum) const;

  /// Collectives (every rank calls them): the mean over all rows from each
  /// rank's mean over its block, the sum over all rows from each rank's sum.
  /// Tensors come back detached.
  torch::Tensor global_mean(const torch::Tensor& local_mean) const;
  double global_mean(double local_mean) const;
  torch::Tensor global_sum(const torch::Tensor& local_sum) const;
  double global_sum(double local_sum) const;
  int64_t global_sum(int64_t local_sum) const;

private:
  int64_t total_ = 0;
  int64_t begin_ = 0;
  int64_t count_ = 0;
  int world_size_ = 1;
  bool sharded_ = false;
};

} // namespace ddp
