#pragma once

// ddp::ZeroRedundancyOptimizer: ZeRO stage 1, optimizer state sharded over
// the ranks (the C++ counterpart of
// torch.distributed.optim.ZeroRedundancyOptimizer, docs/runtime-zero.md).
//
//   ddp::DistributedDataParallel model_ddp(model);
//   ddp::ZeroRedundancyOptimizer<torch::optim::Adam> opt(
//       model->parameters(), torch::optim::AdamOptions(1e-3));
//   ... opt.zero_grad(); loss.backward(); opt.step(); ...
//
// Each parameter has one owner rank (parameters sorted by size, largest
// first, each given to the rank with the fewest elements so far). Each rank
// runs the wrapped optimizer `Opt` on the parameters it owns, so it holds the
// optimizer state (Adam's two moments) of those only, and after each step
// broadcasts them to the other ranks. Gradients must be equal on every rank
// when step() runs, as DistributedDataParallel leaves them.

#include <ddp/distributed.h>

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ddp {

namespace detail {

/// Owner rank of each parameter, per group: all parameters of all groups
/// sorted by number of elements, largest first (ties keep their order), each
/// given to the rank with the fewest elements so far (the lowest such rank).
std::vector<std::vector<int>>
zero_partition(const std::vector<std::vector<int64_t>>& numels, int world_size);

/// Throws std::invalid_argument for what ZeroRedundancyOptimizer refuses: no
/// parameter at all, an undefined tensor, parameters on several devices.
/// Collective when distributed: every rank must hold the same number of
/// parameters with the same total size.
void zero_check_parameters(
    const std::vector<torch::optim::OptimizerParamGroup>& groups);

/// After a step: each rank's parameters, from that rank to all others,
/// flattened into buckets of one dtype each (collective).
void zero_broadcast_shards(
    const std::vector<std::vector<torch::Tensor>>& params_by_owner);

/// Elements in the tensors of one parameter's optimizer state (SGD, Adam,
/// AdamW, RMSprop, Adagrad; 0 for other state types).
int64_t zero_state_numel(const torch::optim::OptimizerParamState& state);

/// Every rank's `bytes`, in rank order, on `to_rank`; empty elsewhere
/// (collective; the tensors travel on `device`).
std::vector<std::string> zero_gather_bytes(const std::string& bytes,
                                           int to_rank, torch::Device device);

/// The key under which torch::optim::Optimizer::state() holds the state of
/// `param`: a string in LibTorch 1.x, the TensorImpl's address in 2.x.
/// (Overloads, not `if constexpr`: the header stays C++14, as migrated
/// programs may be.)
inline void zero_state_key(const torch::Tensor& param, std::string& key) {
  std::ostringstream text; // what c10::guts::to_string spells
  text << param.unsafeGetTensorImpl();
  key = text.str();
}
template <typename Key>
void zero_state_key(const torch::Tensor& param, Key*& key) {
  key = static_cast<Key*>(param.unsafeGetTensorImpl());
}
template <typename Key> Key zero_state_key(const torch::Tensor& param) {
  Key key{};
  zero_state_key(param, key);
  return key;
}

/// The options class of a torch::optim optimizer, for `Opt(parameters, lr)`
/// (its options are made from a learning rate, as Opt's are).
template <typename Opt> struct zero_options {};
template <> struct zero_options<torch::optim::SGD> {
  using type = torch::optim::SGDOptions;
};
template <> struct zero_options<torch::optim::Adam> {
  using type = torch::optim::AdamOptions;
};
template <> struct zero_options<torch::optim::AdamW> {
  using type = torch::optim::AdamWOptions;
};
template <> struct zero_options<torch::optim::RMSprop> {
  using type = torch::optim::RMSpropOptions;
};
template <> struct zero_options<torch::optim::Adagrad> {
  using type = torch::optim::AdagradOptions;
};

template <typename Options>
using zero_if_options = typename std::enable_if<
    std::is_base_of<torch::optim::OptimizerOptions, Options>::value>::type;

} // namespace detail

/// ZeRO stage 1 over any torch::optim optimizer `Opt` (SGD, Adam, AdamW,
/// RMSprop, Adagrad, ...) built as `Opt(std::vector<OptimizerParamGroup>,
/// Options)`. It is a torch::optim::Optimizer itself: param_groups() are
/// the full groups (all parameters), whose options (the learning rate a
/// scheduler such as torch::optim::StepLR sets) are passed to the inner
/// optimizer before each step; zero_grad() clears every parameter's
/// gradient. The state of each parameter lives in the inner optimizer of its
/// owner rank (local_optimizer()); state() of this object stays empty.
///
/// Construction and step() are collective: every rank calls them, in the
/// same order. Saving: consolidate_state_dict(to_rank) on every rank, then
/// torch::save(optimizer, path) on to_rank; loading: torch::load(optimizer,
/// path) on every rank. The file is the one `Opt` over all parameters saves,
/// so either optimizer loads the other's checkpoints.
template <typename Opt>
class ZeroRedundancyOptimizer : public torch::optim::Optimizer {
  static_assert(std::is_base_of<torch::optim::Optimizer, Opt>::value,
                "ddp::ZeroRedundancyOptimizer<Opt>: Opt must be a "
                "torch::optim optimizer");

public:
  using Groups = std::vector<torch::optim::OptimizerParamGroup>;

  template <typename Options, typename = detail::zero_if_options<Options>>
  ZeroRedundancyOptimizer(std::vector<torch::Tensor> parameters,
                          const Options& options)
      : ZeroRedundancyOptimizer(
            Groups{torch::optim::OptimizerParamGroup(std::move(parameters))},
            options) {}

  /// `Opt(parameters, lr)`: options made from a learning rate, as the
  /// optimizers of LibTorch take them (SGD, Adam, AdamW, RMSprop, Adagrad).
  template <typename O = Opt,
            typename Options = typename detail::zero_options<O>::type>
  ZeroRedundancyOptimizer(std::vector<torch::Tensor> parameters, double lr)
      : ZeroRedundancyOptimizer(std::move(parameters), Options(lr)) {}

  /// Several parameter groups, each with its own options (or `options`).
  template <typename Options, typename = detail::zero_if_options<Options>>
  ZeroRedundancyOptimizer(const Groups& groups, const Options& options)
      : torch::optim::Optimizer(groups, std::make_unique<Options>(options)) {
    factory_ = [options](const Groups& g) {
      return std::make_unique<Opt>(g, options);
    };
    detail::zero_check_parameters(param_groups_);
    std::vector<std::vector<int64_t>> numels;
    for (const auto& group : param_groups_) {
      numels.emplace_back();
      for (const auto& p : group.params()) {
        numels.back().push_back(p.numel());
      }
    }
    owners_ = detail::zero_partition(numels, world_size());
    inner_ = factory_(share(rank()));
  }

  /// Runs `closure` (with gradients enabled) if given, steps this rank's
  /// share with the current options of param_groups(), then broadcasts every
  /// share from its owner. Returns the closure's loss (or an undefined
  /// tensor).
  torch::Tensor step(LossClosure closure = nullptr) override {
    check_groups_unchanged();
    torch::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (size_t i = 0; i < param_groups_.size(); ++i) {
      inner_->param_groups()[i].set_options(param_groups_[i].options().clone());
    }
    inner_->step();
    std::vector<std::vector<torch::Tensor>> by_owner(world_size());
    for (size_t g = 0; g < param_groups_.size(); ++g) {
      const auto& params = param_groups_[g].params();
      for (size_t i = 0; i < params.size(); ++i) {
        by_owner[owners_[g][i]].push_back(params[i]);
      }
    }
    detail::zero_broadcast_shards(by_owner);
    ++steps_;
    return loss;
  }

  /// Elements in the optimizer state this rank holds (Adam: 2 per element
  /// of the parameters it owns, once they have been stepped).
  int64_t local_state_numel() const {
    int64_t total = 0;
    for (const auto& entry : inner_->state()) {
      total += detail::zero_state_numel(*entry.second);
    }
    return total;
  }

  /// The rank that owns parameter `index` of param_groups()[group].
  int owner(size_t group, size_t index) const {
    return owners_.at(group).at(index);
  }
  /// The optimizer of this rank's share: one group per group of
  /// param_groups(), with the parameters this rank owns.
  Opt& local_optimizer() { return *inner_; }
  const Opt& local_optimizer() const { return *inner_; }

  /// Collective: gathers every rank's state on `to_rank`, where
  /// torch::save(optimizer, path) (save()) then writes the whole state,
  /// until the next step. Every rank's state travels to every rank (an
  /// all-gather), so it briefly costs the memory of the whole state.
  void consolidate_state_dict(int to_rank = 0) {
    if (to_rank < 0 || to_rank >= world_size()) {
      throw std::invalid_argument(
          "ddp::ZeroRedundancyOptimizer::consolidate_state_dict: to_rank " +
          std::to_string(to_rank) + " is not a rank (world size " +
          std::to_string(world_size()) + ")");
    }
    check_groups_unchanged();
    consolidated_.reset();
    if (world_size() == 1) {
      consolidated_ = full_from_local();
    } else {
      torch::serialize::OutputArchive archive;
      inner_->save(archive);
      std::ostringstream bytes;
      archive.save_to(bytes);
      auto all = detail::zero_gather_bytes(bytes.str(), to_rank, device());
      if (rank() == to_rank) {
        auto full = full_from_local();
        for (int r = 0; r < world_size(); ++r) {
          if (r == rank()) {
            continue;
          }
          torch::serialize::InputArchive in;
          in.load_from(all[r].data(), all[r].size());
          auto part = factory_(share(r));
          part->load(in);
          for (auto& entry : part->state()) {
            full->state()[entry.first] = std::move(entry.second);
          }
        }
        consolidated_ = std::move(full);
      }
    }
    consolidated_rank_ = to_rank;
    consolidated_at_ = steps_;
  }

  /// The whole state, as `Opt` over all parameters saves it. Needs
  /// consolidate_state_dict(r) on every rank since the last step and runs
  /// on rank r; at world size 1 it needs nothing.
  void save(torch::serialize::OutputArchive& archive) const override {
    if (world_size() == 1) {
      full_from_local()->save(archive);
      return;
    }
    if (consolidated_at_ != steps_ || consolidated_rank_ != rank() ||
        !consolidated_) {
      throw std::runtime_error(
          "ddp::ZeroRedundancyOptimizer::save on rank " +
          std::to_string(rank()) +
          ": each rank holds only its share of the optimizer state; call "
          "optimizer.consolidate_state_dict(" +
          std::to_string(rank()) +
          ") on every rank after the last step, then torch::save(optimizer, "
          "path) on rank " +
          std::to_string(rank()));
    }
    consolidated_->save(archive);
  }

  /// Reads a whole state (what save() or `Opt` over the same parameters
  /// wrote) and keeps this rank's share. Every rank loads the same file.
  void load(torch::serialize::InputArchive& archive) override {
    check_groups_unchanged();
    auto full = factory_(param_groups_);
    full->load(archive);
    for (size_t i = 0; i < param_groups_.size(); ++i) {
      param_groups_[i].set_options(full->param_groups()[i].options().clone());
    }
    auto& local = inner_->state();
    using Key = typename std::decay<decltype(local)>::type::key_type;
    local.clear();
    for (const auto& group : inner_->param_groups()) {
      for (const auto& p : group.params()) {
        const Key key = detail::zero_state_key<Key>(p);
        auto found = full->state().find(key);
        if (found != full->state().end()) {
          local[key] = std::move(found->second);
        }
      }
    }
    consolidated_.reset();
    consolidated_at_ = -1;
  }

private:
  static int rank() { return ddp::is_distributed() ? ddp::rank() : 0; }
  static int world_size() {
    return ddp::is_distributed() ? ddp::world_size() : 1;
  }

  // The parameters' device (the constructor checked there is one).
  torch::Device device() const {
    for (const auto& group : param_groups_) {
      if (!group.params().empty()) {
        return group.params().front().device();
      }
    }
    return torch::kCPU;
  }

  // Rank r's share: one group per group, with its options.
  Groups share(int r) const {
    Groups groups;
    for (size_t g = 0; g < param_groups_.size(); ++g) {
      std::vector<torch::Tensor> mine;
      const auto& params = param_groups_[g].params();
      for (size_t i = 0; i < params.size(); ++i) {
        if (owners_[g][i] == r) {
          mine.push_back(params[i]);
        }
      }
      groups.emplace_back(std::move(mine), param_groups_[g].options().clone());
    }
    return groups;
  }

  // `Opt` over all parameters, holding (copies of) this rank's state.
  std::unique_ptr<Opt> full_from_local() const {
    auto full = factory_(param_groups_);
    for (const auto& entry : inner_->state()) {
      full->state()[entry.first] = entry.second->clone();
    }
    return full;
  }

  void check_groups_unchanged() const {
    bool same = param_groups_.size() == owners_.size();
    for (size_t g = 0; same && g < owners_.size(); ++g) {
      same = param_groups_[g].params().size() == owners_[g].size();
    }
    if (!same) {
      throw std::logic_error(
          "ddp::ZeroRedundancyOptimizer: parameters were added after "
          "construction (add_param_group / add_parameters); the partition "
          "over the ranks is fixed, build a new optimizer instead");
    }
  }

  std::function<std::unique_ptr<Opt>(const Groups&)> factory_;
  std::vector<std::vector<int>> owners_;
  std::unique_ptr<Opt> inner_;
  int64_t steps_ = 0;
  std::unique_ptr<Opt> consolidated_;
  int consolidated_rank_ = -1;
  int64_t consolidated_at_ = -1;
};

} // namespace ddp
