// ddp::RowShard (rows.h).

#include <ddp/rows.h>

#include <ddp/distributed.h>

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

namespace ddp {

RowShard::RowShard(int64_t total_rows) : total_(total_rows) {
  TORCH_CHECK(total_rows >= 0, "ddp::RowShard: ", total_rows,
              " rows is no number of rows");
  world_size_ = ddp::is_distributed() ? ddp::world_size() : 1;
  sharded_ = world_size_ > 1 && total_rows >= world_size_;
  if (!sharded_) {
    count_ = total_rows;
    return;
  }
  const int64_t n = world_size_;
  const int64_t r = ddp::rank();
  // The first total % n blocks have one row more.
  const int64_t base = total_rows / n;
  const int64_t extra = total_rows % n;
  begin_ = r * base + std::min(r, extra);
  count_ = base + (r < extra ? 1 : 0);
}

torch::Tensor RowShard::of(const torch::Tensor& tensor) const {
  TORCH_CHECK(tensor.defined() && tensor.dim() > 0,
              "ddp::RowShard::of: the tensor has no rows");
  TORCH_CHECK(tensor.size(0) == total_, "ddp::RowShard::of: the tensor has ",
              tensor.size(0), " rows, the shard was made for ", total_,
              ": every tensor of one full batch must have as many rows");
  return sharded_ ? tensor.narrow(0, begin_, count_) : tensor;
}

double RowShard::mean_weight() const {
  return sharded_ ? static_cast<double>(world_size_) * count_ / total_ : 1.0;
}

double RowShard::sum_weight() const {
  return sharded_ ? static_cast<double>(world_size_) : 1.0;
}

torch::Tensor RowShard::mean_weighted(const torch::Tensor& local_mean) const {
  return sharded_ ? local_mean * mean_weight() : local_mean;
}

torch::Tensor RowShard::sum_weighted(const torch::Tensor& local_sum) const {
  return sharded_ ? local_sum * sum_weight() : local_sum;
}

torch::Tensor RowShard::global_mean(const torch::Tensor& local_mean) const {
  if (!sharded_) {
    return local_mean.detach();
  }
  // In double: the shares' sum must not lose what one process would keep.
  auto weighted = local_mean.detach().to(torch::kDouble) *
                  (static_cast<double>(count_) / total_);
  ddp::all_reduce(weighted);
  return weighted.to(local_mean.scalar_type());
}

double RowShard::global_mean(double local_mean) const {
  return sharded_ ? ddp::all_reduce(local_mean * count_ / total_) : local_mean;
}

torch::Tensor RowShard::global_sum(const torch::Tensor& local_sum) const {
  if (!sharded_) {
    return local_sum.detach();
  }
  auto sum = local_sum.detach().clone();
  ddp::all_reduce(sum);
  return sum;
}

double RowShard::global_sum(double local_sum) const {
  return sharded_ ? ddp::all_reduce(local_sum) : local_sum;
}

int64_t RowShard::global_sum(int64_t local_sum) const {
  return sharded_ ? ddp::all_reduce(local_sum) : local_sum;
}

} // namespace ddp
