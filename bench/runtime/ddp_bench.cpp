// One run of the DDP benchmark (see run.sh / bench.py): trains a model for a
// number of steps and prints one "RESULT {...}" JSON line with the median
// step time. Modes: `ddp` (ddp::DistributedDataParallel, under a launcher's
// environment), `single` (one process, no DDP), `allreduce` (one bare
// all-reduce of a tensor as large as all gradients, the communication floor).
// `--optimizer sgd|adam` (SGD with momentum by default) and `--zero 1`
// (ddp::ZeroRedundancyOptimizer around it; bench/runtime/zero.py).

#include <ddp/ddp.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string model = "mlp";
  std::string mode = "ddp";
  int64_t batch = 8;
  int steps = 40;
  int warmup = 8;
  std::string optimizer = "sgd";
  bool zero = false;
  ddp::DistributedDataParallelOptions ddp_options;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "ddp_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--model") {
        args.model = value();
      } else if (a == "--mode") {
        args.mode = value();
      } else if (a == "--batch") {
        args.batch = std::stoll(value());
      } else if (a == "--steps") {
        args.steps = std::stoi(value());
      } else if (a == "--warmup") {
        args.warmup = std::stoi(value());
      } else if (a == "--bucket-cap-mb") {
        args.ddp_options.bucket_cap_mb(std::stod(value()));
      } else if (a == "--bucket-view") {
        args.ddp_options.gradient_as_bucket_view(std::stoi(value()) != 0);
      } else if (a == "--broadcast-buffers") {
        args.ddp_options.broadcast_buffers(std::stoi(value()) != 0);
      } else if (a == "--shared-memory") {
        args.ddp_options.shared_memory(std::stoi(value()) != 0);
      } else if (a == "--optimizer") {
        args.optimizer = value();
      } else if (a == "--zero") {
        args.zero = std::stoi(value()) != 0;
      } else if (a == "--check-sync") {
        args.ddp_options.check_sync_every(std::stoll(value()));
      } else {
        std::cerr << "ddp_bench: unknown argument " << a << "\n";
        std::exit(2);
      }
    } catch (const std::logic_error&) {
      std::cerr << "ddp_bench: bad number for " << a << "\n";
      std::exit(2);
    }
  }
  if (args.batch <= 0 || args.steps <= 0 || args.warmup < 0) {
    std::cerr << "ddp_bench: batch and steps must be positive\n";
    std::exit(2);
  }
  if (args.optimizer != "sgd" && args.optimizer != "adam") {
    std::cerr << "ddp_bench: --optimizer is sgd or adam\n";
    std::exit(2);
  }
  return args;
}

// The optimizer of the run: SGD with momentum or Adam, sharded or not.
std::unique_ptr<torch::optim::Optimizer>
make_optimizer(const Args& args, const std::vector<torch::Tensor>& params) {
  const auto sgd = torch::optim::SGDOptions(0.01).momentum(0.9);
  const auto adam = torch::optim::AdamOptions(1e-3);
  if (args.zero) {
    if (args.optimizer == "adam") {
      return std::make_unique<ddp::ZeroRedundancyOptimizer<torch::optim::Adam>>(
          params, adam);
    }
    return std::make_unique<ddp::ZeroRedundancyOptimizer<torch::optim::SGD>>(
        params, sgd);
  }
  if (args.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(params, adam);
  }
  return std::make_unique<torch::optim::SGD>(params, sgd);
}

// Bytes of optimizer state this process holds (float32 state).
int64_t state_bytes(const Args& args, const torch::optim::Optimizer& opt) {
  int64_t numel = 0;
  if (args.zero && args.optimizer == "adam") {
    numel =
        static_cast<const ddp::ZeroRedundancyOptimizer<torch::optim::Adam>&>(
            opt)
            .local_state_numel();
  } else if (args.zero) {
    numel =
        static_cast<const ddp::ZeroRedundancyOptimizer<torch::optim::SGD>&>(opt)
            .local_state_numel();
  } else {
    for (const auto& entry : opt.state()) {
      numel += ddp::detail::zero_state_numel(*entry.second);
    }
  }
  return numel * static_cast<int64_t>(sizeof(float));
}

// MLP 512-1024-1024-1024-10: about 3.2M parameters.
torch::nn::Sequential make_mlp() {
  return torch::nn::Sequential(torch::nn::Linear(512, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 10));
}

// A small ConvNet with BatchNorm on 3x32x32 inputs. `Norm` is plain
// BatchNorm2d or ddp::SyncBatchNorm2d.
template <typename Norm> torch::nn::Sequential make_convnet() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1)),
                        Norm(16), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
                        Norm(32), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                        nn::Linear(32 * 8 * 8, 10));
}

// CPU time (user + system, all threads: Gloo's included) of this process.
double cpu_ms() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

// "MARK <what>" on rank 0, at once: bench/runtime/multihost.py reads the
// link's byte counters when it sees it.
void mark(const char* what) {
  if (ddp::rank() == 0) {
    std::printf("MARK %s\n", what);
    std::fflush(stdout);
  }
}

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    torch::set_num_threads(1);
    if (args.mode != "single") {
      ddp::init(argc, argv);
    }
    torch::manual_seed(0);
    torch::nn::Sequential model;
    torch::Tensor x;
    if (args.model == "mlp") {
      model = make_mlp();
      x = torch::randn({args.batch, 512});
    } else if (args.model == "convnet") {
      model = make_convnet<torch::nn::BatchNorm2d>();
      x = torch::randn({args.batch, 3, 32, 32});
    } else if (args.model == "convnet_sync") {
      model = make_convnet<ddp::SyncBatchNorm2d>();
      x = torch::randn({args.batch, 3, 32, 32});
    } else {
      std::cerr << "ddp_bench: unknown model " << args.model << "\n";
      return 2;
    }
    auto y = torch::randint(0, 10, {args.batch}, torch::kLong);
    int64_t numel = 0;
    for (const auto& p : model->parameters()) {
      numel += p.numel();
    }

    if (args.mode == "allreduce") {
      auto pg = ddp::process_group();
      if (!pg) {
        std::cerr << "ddp_bench: allreduce mode needs a launcher environment\n";
        return 2;
      }
      auto flat = torch::randn({numel});
      std::vector<double> times;
      for (int i = 0; i < args.warmup + args.steps; ++i) {
        ddp::barrier();
        const double t0 = now_ms();
        std::vector<torch::Tensor> tensors{flat};
        pg->allreduce(tensors)->wait();
        if (i >= args.warmup) {
          times.push_back(now_ms() - t0);
        }
      }
      if (ddp::rank() == 0) {
        std::printf("RESULT {\"mode\": \"allreduce\", \"model\": \"%s\", "
                    "\"params\": %lld, \"median_ms\": %.4f}\n",
                    args.model.c_str(), static_cast<long long>(numel),
                    median(times));
      }
      return 0;
    }

    std::unique_ptr<ddp::DistributedDataParallel<torch::nn::SequentialImpl>>
        wrapped;
    if (args.mode == "ddp") {
      wrapped = std::make_unique<
          ddp::DistributedDataParallel<torch::nn::SequentialImpl>>(
          model, args.ddp_options);
    } else if (args.mode != "single") {
      std::cerr << "ddp_bench: unknown mode " << args.mode << "\n";
      return 2;
    }
    auto optimizer = make_optimizer(args, model->parameters());
    torch::optim::Optimizer& opt = *optimizer;
    std::vector<double> times, forward_times, backward_times, step_times;
    double cpu_start = 0;
    for (int i = 0; i < args.warmup + args.steps; ++i) {
      if (i == args.warmup) {
        if (wrapped) {
          ddp::barrier();
          wrapped->reset_stats();
        }
        cpu_start = cpu_ms();
        mark("warmup_done"); // for a driver that counts the link's bytes
      }
      // Where the time goes: forward (with zero_grad), backward (with
      // DDP's final wait), optimizer step.
      const double t0 = now_ms();
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      const double t1 = now_ms();
      loss.backward();
      const double t2 = now_ms();
      opt.step();
      const double t3 = now_ms();
      if (i >= args.warmup) {
        times.push_back(t3 - t0);
        forward_times.push_back(t1 - t0);
        backward_times.push_back(t2 - t1);
        step_times.push_back(t3 - t2);
      }
    }
    const double cpu_per_step = (cpu_ms() - cpu_start) / args.steps;
    mark("steps_done");
    // This rank's optimizer state, and the largest and total over ranks.
    const int64_t state = state_bytes(args, opt);
    int64_t state_max = state;
    int64_t state_total = state;
    if (ddp::is_distributed()) {
      state_max = ddp::all_reduce(state_max, ddp::ReduceOp::kMax);
      state_total = ddp::all_reduce(state_total);
    }
    if (!ddp::is_distributed() || ddp::rank() == 0) {
      ddp::DataParallelStats stats;
      int64_t buckets = 0;
      if (wrapped) {
        stats = wrapped->stats();
        buckets = wrapped->bucket_count();
      }
      std::printf(
          "RESULT {\"mode\": \"%s\", \"model\": \"%s\", \"batch\": %lld, "
          "\"params\": %lld, \"median_ms\": %.4f, \"mean_ms\": %.4f, "
          "\"cpu_ms\": %.4f, \"sync_checks\": %lld, "
          "\"forward_ms\": %.4f, \"backward_ms\": %.4f, \"step_ms\": %.4f, "
          "\"buckets\": %lld, "
          "\"allreduces_per_step\": %.3f, \"collectives_per_step\": %.3f, "
          "\"bytes_per_step\": %.1f, \"optimizer\": \"%s\", \"zero\": %d, "
          "\"state_bytes\": %lld, \"state_bytes_max\": %lld, "
          "\"state_bytes_total\": %lld}\n",
          args.mode.c_str(), args.model.c_str(),
          static_cast<long long>(args.batch), static_cast<long long>(numel),
          median(times),
          std::accumulate(times.begin(), times.end(), 0.0) / times.size(),
          cpu_per_step, static_cast<long long>(stats.sync_checks),
          median(forward_times), median(backward_times), median(step_times),
          static_cast<long long>(buckets),
          double(stats.allreduces) / args.steps,
          double(stats.collectives()) / args.steps,
          double(stats.bytes) / args.steps, args.optimizer.c_str(),
          args.zero ? 1 : 0, static_cast<long long>(state),
          static_cast<long long>(state_max),
          static_cast<long long>(state_total));
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ddp_bench: " << e.what() << "\n";
    return 1;
  }
}
