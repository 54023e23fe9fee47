// The program of scripts/gpu-check.sh (on a GPU machine) and of the ctest
// gpu_check.cpu (the same checks on the CPU, over Gloo). Each mode runs
// under ddprun, prints one line "RESULT <mode> ok=0|1 key=value ..." on rank
// 0 and exits 1 when its check fails:
//
//   wrapped  world of one with DDP_GROUP_OF_ONE=1: a model with BatchNorm,
//            trained K steps as SyncBatchNorm inside DistributedDataParallel
//            on a real process group (buckets, SyncBatchNorm's all-gather and
//            all-reduce, the shape check, the broadcast), equals the same
//            model trained without the wrapper (within 1e-5).
//   ranks    world of two: each rank trains on its half of a 2B batch; the
//            parameters are identical on both ranks and equal to 1x2B trained
//            in one process (within 1e-5).
//   bench    world of one (a group of one): milliseconds per training step
//            of an MLP through the wrapper.
//
//   ddp_gpu_check MODE [--backend NAME] [--steps K]

#include <ddp/ddp.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

constexpr double kTolerance = 1e-5;
constexpr int64_t kBatch = 8; // per rank

template <typename Norm> struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(16, 32))),
        norm(register_module("norm", Norm(32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc2(torch::relu(norm(fc1(x))));
  }
  torch::nn::Linear fc1;
  Norm norm;
  torch::nn::Linear fc2;
};

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(16, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc2(torch::relu(fc1(x)));
  }
  torch::nn::Linear fc1, fc2;
};

/// Makes `to`'s parameters and buffers those of `from` (same names).
void copy_state(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto source = from.named_parameters();
  for (auto& item : to.named_parameters()) {
    item.value().copy_(source[item.key()]);
  }
  auto buffers = from.named_buffers();
  for (auto& item : to.named_buffers()) {
    item.value().copy_(buffers[item.key()]);
  }
}

/// Largest |a - b| over the parameters and buffers of two modules.
double max_difference(torch::nn::Module& a, torch::nn::Module& b) {
  double worst = 0;
  auto theirs = b.named_parameters();
  for (auto& item : a.named_parameters()) {
    worst = std::max(
        worst, (item.value() - theirs[item.key()]).abs().max().item<double>());
  }
  auto buffers = b.named_buffers();
  for (auto& item : a.named_buffers()) {
    if (item.value().is_floating_point()) {
      worst = std::max(worst, (item.value() - buffers[item.key()])
                                  .abs()
                                  .max()
                                  .item<double>());
    }
  }
  return worst;
}

torch::Tensor flat_parameters(torch::nn::Module& module) {
  std::vector<torch::Tensor> parts;
  for (auto& p : module.parameters()) {
    parts.push_back(p.detach().flatten());
  }
  return torch::cat(parts);
}

struct Args {
  std::string mode;
  std::string backend; // expected; empty: any
  int steps = 5;
};

Args parse(int argc, char** argv) {
  Args args;
  if (argc > 1) {
    args.mode = argv[1];
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--backend") {
      args.backend = argv[i + 1];
    } else if (flag == "--steps") {
      args.steps = std::atoi(argv[i + 1]);
    }
  }
  return args;
}

/// Fails unless a process group of the expected backend exists.
bool check_group(const Args& args) {
  if (!ddp::is_distributed()) {
    std::printf("RESULT %s ok=0 error=no-process-group\n", args.mode.c_str());
    return false;
  }
  if (!args.backend.empty() && ddp::backend_name() != args.backend) {
    std::printf("RESULT %s ok=0 error=backend-%s-not-%s\n", args.mode.c_str(),
                ddp::backend_name().c_str(), args.backend.c_str());
    return false;
  }
  return true;
}

int wrapped(const Args& args) {
  const auto device = ddp::device();
  torch::manual_seed(7);
  const auto x = torch::randn({args.steps, kBatch, 16}).to(device);
  const auto y = torch::randn({args.steps, kBatch, 1}).to(device);

  torch::manual_seed(1);
  auto plain = std::make_shared<NetImpl<torch::nn::BatchNorm1d>>();
  auto synced = std::make_shared<NetImpl<ddp::SyncBatchNorm1d>>();
  copy_state(*plain, *synced);
  plain->to(device);
  synced->to(device);
  const int64_t collectives_before = ddp::detail::sync_batch_norm_collectives();
  ddp::DistributedDataParallel model(synced);
  torch::optim::SGD plain_opt(plain->parameters(),
                              torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD synced_opt(synced->parameters(),
                               torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < args.steps; ++step) {
    plain_opt.zero_grad();
    torch::mse_loss(plain->forward(x[step]), y[step]).backward();
    plain_opt.step();
    synced_opt.zero_grad();
    torch::mse_loss(model->forward(x[step]), y[step]).backward();
    synced_opt.step();
  }
  const double diff = max_difference(*plain, *synced);
  const int64_t collectives =
      ddp::detail::sync_batch_norm_collectives() - collectives_before;
  const bool ok = model.is_active() && model.bucket_count() > 0 &&
                  collectives >= 2 * args.steps && diff <= kTolerance;
  std::printf("RESULT wrapped ok=%d backend=%s device=%s steps=%d buckets=%lld "
              "syncbn_collectives=%lld max_diff=%.3g\n",
              ok, ddp::backend_name().c_str(), device.str().c_str(),
              args.steps, static_cast<long long>(model.bucket_count()),
              static_cast<long long>(collectives), diff);
  return ok ? 0 : 1;
}

int ranks(const Args& args) {
  const auto device = ddp::device();
  const int world = ddp::world_size();
  torch::manual_seed(7);
  const auto x = torch::randn({args.steps, world * kBatch, 16}).to(device);
  const auto y = torch::randn({args.steps, world * kBatch, 1}).to(device);

  torch::manual_seed(1);
  auto reference = std::make_shared<MlpImpl>();
  auto trained = std::make_shared<MlpImpl>();
  copy_state(*reference, *trained);
  reference->to(device);
  trained->to(device);
  ddp::DistributedDataParallel model(trained);
  torch::optim::SGD ref_opt(reference->parameters(),
                            torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt(trained->parameters(),
                        torch::optim::SGDOptions(0.1).momentum(0.9));
  const int64_t begin = ddp::rank() * kBatch;
  for (int step = 0; step < args.steps; ++step) {
    ref_opt.zero_grad();
    torch::mse_loss(reference->forward(x[step]), y[step]).backward();
    ref_opt.step();
    opt.zero_grad();
    torch::mse_loss(model->forward(x[step].narrow(0, begin, kBatch)),
                    y[step].narrow(0, begin, kBatch))
        .backward();
    opt.step();
  }
  // Identical on every rank: the element-wise maximum equals the minimum.
  auto high = flat_parameters(*trained).clone();
  auto low = high.clone();
  ddp::all_reduce(high, ddp::ReduceOp::kMax);
  ddp::all_reduce(low, ddp::ReduceOp::kMin);
  const double spread = (high - low).abs().max().item<double>();
  const double diff = ddp::all_reduce(max_difference(*reference, *trained),
                                      ddp::ReduceOp::kMax);
  const bool ok = model.is_active() && spread == 0 && diff <= kTolerance;
  if (ddp::is_main_process()) {
    std::printf("RESULT ranks ok=%d backend=%s device=%s world=%d steps=%d "
                "rank_spread=%.3g max_diff_vs_1x%lldB=%.3g\n",
                ok, ddp::backend_name().c_str(), device.str().c_str(), world,
                args.steps, spread, static_cast<long long>(world), diff);
  }
  return ok ? 0 : 1;
}

int bench(const Args& args) {
  const auto device = ddp::device();
  torch::manual_seed(1);
  auto mlp = torch::nn::Sequential(
      torch::nn::Linear(512, 1024), torch::nn::ReLU(),
      torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
      torch::nn::Linear(1024, 10));
  mlp->to(device);
  ddp::DistributedDataParallel model(mlp.ptr());
  torch::optim::SGD opt(mlp->parameters(), torch::optim::SGDOptions(0.01));
  const auto x = torch::randn({64, 512}).to(device);
  const auto y = torch::randint(0, 10, {64}).to(device);
  auto step = [&] {
    opt.zero_grad();
    torch::nll_loss(torch::log_softmax(mlp->forward(x), 1), y).backward();
    opt.step();
  };
  auto sync = [&] {
    if (device.is_cuda()) {
      torch::cuda::synchronize();
    }
  };
  for (int i = 0; i < 10; ++i) {
    step();
  }
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args.steps; ++i) {
    step();
  }
  sync();
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count() /
                    args.steps;
  const bool ok = model.is_active();
  std::printf("RESULT bench ok=%d backend=%s device=%s steps=%d ms_per_step=%.3f\n",
              ok, ddp::backend_name().c_str(), device.str().c_str(),
              args.steps, ms);
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  // The `ranks` check trains a reference model on every rank, outside any
  // wrapper, on purpose (the whole global batch in one process): the
  // documented opt-in of the runtime's unwrapped-training net.
  ::setenv("DDP_ALLOW_UNWRAPPED", "1", /*overwrite=*/0);
  ddp::init(argc, argv);
  const Args args = parse(argc, argv);
  if (!check_group(args)) {
    return 1;
  }
  if (args.mode == "wrapped") {
    return wrapped(args);
  }
  if (args.mode == "ranks") {
    return ranks(args);
  }
  if (args.mode == "bench") {
    return bench(args);
  }
  std::fprintf(stderr, "usage: ddp_gpu_check wrapped|ranks|bench "
                       "[--backend NAME] [--steps K]\n");
  return 2;
}
