#include <ddp/zero_redundancy_optimizer.h>

#include <ddp/distributed.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddp {
namespace detail {

std::vector<std::vector<int>>
zero_partition(const std::vector<std::vector<int64_t>>& numels,
               int world_size) {
  if (world_size < 1) {
    throw std::invalid_argument("ddp::ZeroRedundancyOptimizer: world size " +
                                std::to_string(world_size));
  }
  struct Item {
    size_t group;
    size_t index;
    int64_t numel;
  };
  std::vector<Item> items;
  std::vector<std::vector<int>> owners(numels.size());
  for (size_t g = 0; g < numels.size(); ++g) {
    owners[g].assign(numels[g].size(), 0);
    for (size_t i = 0; i < numels[g].size(); ++i) {
      items.push_back({g, i, numels[g][i]});
    }
  }
  std::stable_sort(
      items.begin(), items.end(),
      [](const Item& a, const Item& b) { return a.numel > b.numel; });
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
  for (const auto& item : items) {
    const auto least = std::min_element(load.begin(), load.end());
    *least += item.numel;
    owners[item.group][item.index] = static_cast<int>(least - load.begin());
  }
  return owners;
}

void zero_check_parameters(
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  int64_t count = 0;
  int64_t total = 0;
  const torch::Tensor* first = nullptr;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      const std::string where =
          "parameter #" + std::to_string(i) + " of group #" + std::to_string(g);
      if (!p.defined()) {
        throw std::invalid_argument("ddp::ZeroRedundancyOptimizer: " + where +
                                    " is an undefined tensor");
      }
      if (first == nullptr) {
        first = &p;
      } else if (p.device() != first->device()) {
        throw std::invalid_argument(
            "ddp::ZeroRedundancyOptimizer: parameters on several devices (" +
            first->device().str() + " and " + p.device().str() + " for " +
            where + "); every parameter must be on this rank's device");
      }
      ++count;
      total += p.numel();
    }
  }
  if (count == 0) {
    throw std::invalid_argument(
        "ddp::ZeroRedundancyOptimizer: empty parameter list (no parameter "
        "in any group): nothing to optimize");
  }
  if (!is_distributed()) {
    return;
  }
  // The partition is computed on every rank alone: it must see the same
  // parameters everywhere.
  std::vector<int64_t> mine{count, total, -count, -total};
  auto all = mine;
  all_reduce(all, ReduceOp::kMax);
  if (all[0] != count || all[1] != total || -all[2] != count ||
      -all[3] != total) {
    throw std::invalid_argument(
        "ddp::ZeroRedundancyOptimizer: the ranks' parameters differ (rank " +
        std::to_string(rank()) + " has " + std::to_string(count) +
        " parameters of " + std::to_string(total) +
        " elements; across ranks from " + std::to_string(-all[2]) + " to " +
        std::to_string(all[0]) + " parameters, " + std::to_string(-all[3]) +
        " to " + std::to_string(all[1]) +
        " elements); every rank must pass the same model's parameters");
  }
}

void zero_broadcast_shards(
    const std::vector<std::vector<torch::Tensor>>& params_by_owner) {
  if (!is_distributed()) {
    return;
  }
  constexpr int64_t kBucketBytes = int64_t{32} << 20;
  torch::NoGradGuard no_grad;
  const int me = rank();
  for (size_t owner = 0; owner < params_by_owner.size(); ++owner) {
    const auto& params = params_by_owner[owner];
    std::vector<bool> done(params.size(), false);
    for (size_t start = 0; start < params.size(); ++start) {
      if (done[start]) {
        continue;
      }
      // One bucket: parameters of start's dtype, up to the cap.
      const auto dtype = params[start].scalar_type();
      std::vector<torch::Tensor> bucket;
      int64_t bytes = 0;
      for (size_t i = start; i < params.size(); ++i) {
        if (done[i] || params[i].scalar_type() != dtype) {
          continue;
        }
        const int64_t size = params[i].numel() * params[i].element_size();
        if (!bucket.empty() && bytes + size > kBucketBytes) {
          break;
        }
        bucket.push_back(params[i]);
        bytes += size;
        done[i] = true;
      }
      int64_t numel = 0;
      for (const auto& p : bucket) {
        numel += p.numel();
      }
      torch::Tensor flat;
      if (static_cast<int>(owner) == me) {
        std::vector<torch::Tensor> pieces;
        for (const auto& p : bucket) {
          pieces.push_back(p.detach().reshape({-1}));
        }
        flat = pieces.size() == 1 ? pieces.front().contiguous()
                                  : torch::cat(pieces);
      } else {
        flat = torch::empty({numel}, bucket.front().options());
      }
      broadcast(flat, static_cast<int>(owner));
      if (static_cast<int>(owner) != me) {
        int64_t offset = 0;
        for (const auto& p : bucket) {
          p.detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
          offset += p.numel();
        }
      }
    }
  }
}

namespace {
int64_t numel_of(const torch::Tensor& t) { return t.defined() ? t.numel() : 0; }
} // namespace

int64_t zero_state_numel(const torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  if (auto* s = dynamic_cast<const AdamParamState*>(&state)) {
    return numel_of(s->exp_avg()) + numel_of(s->exp_avg_sq()) +
           numel_of(s->max_exp_avg_sq());
  }
  if (auto* s = dynamic_cast<const AdamWParamState*>(&state)) {
    return numel_of(s->exp_avg()) + numel_of(s->exp_avg_sq()) +
           numel_of(s->max_exp_avg_sq());
  }
  if (auto* s = dynamic_cast<const SGDParamState*>(&state)) {
    return numel_of(s->momentum_buffer());
  }
  if (auto* s = dynamic_cast<const RMSpropParamState*>(&state)) {
    return numel_of(s->square_avg()) + numel_of(s->momentum_buffer()) +
           numel_of(s->grad_avg());
  }
  if (auto* s = dynamic_cast<const AdagradParamState*>(&state)) {
    return numel_of(s->sum());
  }
  return 0;
}

std::vector<std::string> zero_gather_bytes(const std::string& bytes,
                                           int to_rank, torch::Device device) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  auto sizes = all_gather(torch::tensor({size}, torch::kLong).to(device));
  int64_t longest = 0;
  for (const auto& s : sizes) {
    longest = std::max(longest, s.item<int64_t>());
  }
  auto mine = torch::zeros({std::max<int64_t>(longest, 1)}, torch::kUInt8);
  std::memcpy(mine.data_ptr(), bytes.data(), bytes.size());
  auto all = all_gather(mine.to(device));
  std::vector<std::string> result;
  if (rank() != to_rank) {
    return result;
  }
  for (size_t r = 0; r < all.size(); ++r) {
    auto cpu = all[r].to(torch::kCPU).contiguous();
    result.emplace_back(static_cast<const char*>(cpu.data_ptr()),
                        static_cast<size_t>(sizes[r].item<int64_t>()));
  }
  return result;
}

} // namespace detail
} // namespace ddp
