// A small training program for the tests of the runtime's safety nets
// (test_safety_nets.cpp) and of ddprun: a linear model, SGD, two epochs. It
// writes "step N" to stderr after every optimizer step and "done" before it
// returns, so that a test can tell when the runtime spoke. The mode
// argument selects how it is (not) made data parallel:
//   loader          ddp::make_data_loader, no wrapper
//   loader-workers  the same with two loader worker threads
//   plain           batches sliced by hand (no ddp loader), no wrapper
//   eval            ddp::make_data_loader under NoGradGuard: no backward
//   wrap            ddp::make_data_loader and a DistributedDataParallel (an
//                   RAII wrapper: destroyed before exit-time checks run)
//   distribute      ddp::make_data_loader and ddp::distribute(model) (alive
//                   until exit)
//   parity B FILE   a DistributedDataParallel; step k's global batch is
//                   samples [k*B*W, (k+1)*B*W) of the data (W the world
//                   size), of which rank r takes the r-th B; then writes
//                   FILE.rank<r>: "shm <0|1>" (uses_shared_memory()),
//                   "hierarchical <0|1>" (uses_hierarchical_allreduce()), one
//                   line "<name> <values>" per parameter, each value with 9
//                   significant digits (a float's bits, round trip). Without
//                   a launcher and B = the global batch, the reference of the
//                   multi-host tests (test/multihost).
//   steps N         a DistributedDataParallel trained N steps, 10 ms apart
//                   ("step N" on stderr): the job the fault tests break
//                   (test/multihost)
//   desync N K      a DistributedDataParallel trained N steps; after step
//                   K's update the last rank changes the bias on its own:
//                   what the sync check (DDP_CHECK_SYNC) must stop
//   partial         a DistributedDataParallel over the model and a second,
//                   unwrapped Linear(4, 2) head trained by its own SGD
//   convert-after-wrap
//                   a DistributedDataParallel, then model->to(kDouble):
//                   the parameters replaced under the wrapper
//   input-grad      a DistributedDataParallel; every batch's input requires
//                   grad (an input-gradient saliency term): a leaf outside
//                   the wrapper that is never stepped
//   target-net      a DistributedDataParallel over the model and a target
//                   copy soft-updated under NoGradGuard, never trained
//   static          prints, from a static object's constructor (before
//                   main), "static main <is_main_process()> rank <rank()>"
//   fail-first A N K
//                   says "attempt <TORCHELASTIC_RESTART_COUNT> of max
//                   <TORCHELASTIC_MAX_RESTARTS>", then trains a
//                   DistributedDataParallel N steps; in attempts before A the
//                   last rank exits 3 after step K: a job that ddprun
//                   --max-restarts must restart (test_ddprun, test/multihost)

#include <ddp/ddp.h>

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

namespace {

int step = 0;

// A global options object that speaks before main (the "static" mode reads
// what it said).
struct EarlyWords {
  EarlyWords() {
    const char* mode = std::getenv("DDP_TRAIN_PROBE_STATIC");
    if (mode != nullptr && std::string(mode) == "1") {
      std::cerr << "static main " << ddp::is_main_process() << " rank "
                << ddp::rank() << std::endl;
    }
  }
} early_words;

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  Pairs(torch::Tensor x, torch::Tensor y) : x(std::move(x)), y(std::move(y)) {}
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  c10::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

void train_step(torch::nn::Linear& model, torch::optim::SGD& optimizer,
                const torch::Tensor& data, const torch::Tensor& target) {
  optimizer.zero_grad();
  auto loss = torch::mse_loss(model->forward(data), target);
  loss.backward();
  optimizer.step();
  std::cerr << "step " << step++ << std::endl;
}

template <typename Loader>
void train_epochs(Loader& loader, torch::nn::Linear& model,
                  torch::optim::SGD& optimizer) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& batch : *loader) {
      train_step(model, optimizer, batch.data, batch.target);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  ddp::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "loader";
  torch::manual_seed(0);
  const auto data = torch::randn({32, 4});
  const auto target = torch::randn({32, 1});
  torch::nn::Linear model(4, 1);
  model->to(ddp::device());
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.1));
  auto make_loader = [&](size_t workers) {
    return ddp::make_data_loader(
        Pairs(data, target).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions(4).workers(workers));
  };

  if (mode == "loader" || mode == "loader-workers") {
    auto loader = make_loader(mode == "loader" ? 0 : 2);
    train_epochs(loader, model, optimizer);
  } else if (mode == "plain") {
    for (int64_t i = ddp::rank() * 4; i < 32; i += 4 * ddp::world_size()) {
      train_step(model, optimizer, data.narrow(0, i, 4),
                 target.narrow(0, i, 4));
    }
  } else if (mode == "eval") {
    torch::NoGradGuard no_grad;
    auto loader = make_loader(0);
    for (auto& batch : *loader) {
      std::cerr << "eval loss "
                << torch::mse_loss(model->forward(batch.data), batch.target)
                       .item<float>()
                << std::endl;
    }
  } else if (mode == "wrap") {
    ddp::DistributedDataParallel model_ddp(model);
    auto loader = make_loader(0);
    train_epochs(loader, model, optimizer);
  } else if (mode == "distribute") {
    ddp::distribute(model);
    auto loader = make_loader(0);
    train_epochs(loader, model, optimizer);
  } else if (mode == "parity" && argc > 3) {
    const int64_t b = std::stoll(argv[2]);
    const int64_t global = b * ddp::world_size();
    ddp::DistributedDataParallel model_ddp(model);
    for (int64_t start = 0; start + global <= data.size(0); start += global) {
      const int64_t mine = start + ddp::rank() * b;
      train_step(model, optimizer, data.narrow(0, mine, b),
                 target.narrow(0, mine, b));
    }
    std::ofstream out(std::string(argv[3]) + ".rank" +
                      std::to_string(ddp::rank()));
    out << "shm " << model_ddp.uses_shared_memory() << "\n"
        << "hierarchical " << model_ddp.uses_hierarchical_allreduce() << "\n"
        << std::setprecision(9);
    for (const auto& item : model->named_parameters()) {
      const auto values = item.value().detach().to(torch::kCPU).contiguous();
      out << item.key();
      for (int64_t i = 0; i < values.numel(); ++i) {
        out << ' ' << values.data_ptr<float>()[i];
      }
      out << "\n";
    }
  } else if (mode == "steps" && argc > 2) {
    const int64_t steps = std::stoll(argv[2]);
    ddp::DistributedDataParallel model_ddp(model);
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t mine = (step * ddp::world_size() + ddp::rank()) * 4 % 28;
      train_step(model, optimizer, data.narrow(0, mine, 4),
                 target.narrow(0, mine, 4));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } else if (mode == "desync" && argc > 3) {
    // Trained N steps under the sync check (DDP_CHECK_SYNC); after step K's
    // update, the last rank changes the bias behind the wrapper's back.
    const int64_t steps = std::stoll(argv[2]);
    const int64_t skew_after = std::stoll(argv[3]);
    ddp::DistributedDataParallel model_ddp(model);
    for (int64_t s = 1; s <= steps; ++s) {
      const int64_t mine = (s * ddp::world_size() + ddp::rank()) * 4 % 28;
      train_step(model, optimizer, data.narrow(0, mine, 4),
                 target.narrow(0, mine, 4));
      if (s == skew_after && ddp::rank() == ddp::world_size() - 1) {
        torch::NoGradGuard no_grad;
        model->bias.add_(1.0);
      }
    }
  } else if (mode == "partial") {
    ddp::DistributedDataParallel model_ddp(model);
    torch::nn::Linear head(4, 2);
    torch::optim::SGD head_optimizer(head->parameters(),
                                     torch::optim::SGDOptions(0.1));
    auto loader = make_loader(0);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        head_optimizer.zero_grad();
        auto loss = torch::mse_loss(model->forward(batch.data), batch.target) +
                    head->forward(batch.data).pow(2).mean();
        loss.backward();
        optimizer.step();
        head_optimizer.step();
        std::cerr << "step " << step++ << std::endl;
      }
    }
  } else if (mode == "convert-after-wrap") {
    ddp::DistributedDataParallel model_ddp(model);
    model->to(torch::kDouble);
    torch::optim::SGD double_optimizer(model->parameters(),
                                       torch::optim::SGDOptions(0.1));
    auto loader = make_loader(0);
    for (auto& batch : *loader) {
      double_optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data.to(torch::kDouble)),
                                  batch.target.to(torch::kDouble));
      loss.backward();
      double_optimizer.step();
      std::cerr << "step " << step++ << std::endl;
    }
  } else if (mode == "input-grad") {
    ddp::DistributedDataParallel model_ddp(model);
    auto loader = make_loader(0);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        auto input = batch.data.clone().requires_grad_(true);
        auto loss = torch::mse_loss(model->forward(input), batch.target);
        loss.backward();
        optimizer.step();
        std::cerr << "step " << step++ << " saliency "
                  << input.grad().abs().sum().item<float>() << std::endl;
      }
    }
  } else if (mode == "target-net") {
    ddp::DistributedDataParallel model_ddp(model);
    torch::nn::Linear target_net(4, 1);
    {
      torch::NoGradGuard no_grad;
      target_net->weight.copy_(model->weight);
      target_net->bias.copy_(model->bias);
    }
    auto loader = make_loader(0);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& batch : *loader) {
        torch::Tensor goal;
        {
          torch::NoGradGuard no_grad;
          goal = 0.5 * (batch.target + target_net->forward(batch.data));
        }
        train_step(model, optimizer, batch.data, goal);
        torch::NoGradGuard no_grad;
        target_net->weight.mul_(0.9).add_(model->weight, 0.1);
        target_net->bias.mul_(0.9).add_(model->bias, 0.1);
      }
    }
  } else if (mode == "static") {
    // The words came before main.
  } else if (mode == "fail-first" && argc > 4) {
    const char* count = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const char* max = std::getenv("TORCHELASTIC_MAX_RESTARTS");
    const int attempt = count ? std::atoi(count) : 0;
    std::cerr << "attempt " << attempt << " of max " << (max ? max : "?")
              << std::endl;
    const int failing_attempts = std::stoi(argv[2]);
    const int64_t steps = std::stoll(argv[3]);
    const int64_t fail_after = std::stoll(argv[4]);
    ddp::DistributedDataParallel model_ddp(model);
    for (int64_t s = 1; s <= steps; ++s) {
      const int64_t mine = (s * ddp::world_size() + ddp::rank()) * 4 % 28;
      train_step(model, optimizer, data.narrow(0, mine, 4),
                 target.narrow(0, mine, 4));
      if (attempt < failing_attempts && s == fail_after &&
          ddp::rank() == ddp::world_size() - 1) {
        std::cerr << "failing in attempt " << attempt << std::endl;
        std::_Exit(3);
      }
    }
  } else {
    std::cerr << "unknown mode " << mode << std::endl;
    return 2;
  }
  std::cerr << "done" << std::endl;
  return 0;
}
