#pragma once

// Process group, environment and collective helpers of the ddp runtime.
//
// ddp::init() reads the launcher's environment (torchrun / ddprun, Slurm,
// Open MPI), strips the legacy --local_rank argument and joins the process
// group. Without a launcher the world has one process and no process group
// exists: every helper below is then a cheap no-op, so a migrated program
// still runs exactly as the single-GPU original did.

#include <torch/torch.h>
// The full c10d::ProcessGroup, so process_group()->allreduce(...) works in
// code that includes only this header (needs no USE_C10D_* macro).
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace c10d {
class ProcessGroup;
} // namespace c10d

namespace ddp {

/// A collective failed on this rank: a peer process exited, stopped
/// answering or was cut off, or did not reach the same collective within the
/// timeout. Every rank of the job fails this way when one fails; the message
/// names the collective, this rank and its host.
class CollectiveError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Which launcher's environment the process found (`kNone`: a plain run).
enum class Launcher { kNone, kTorchrun, kSlurm, kOpenMPI };

/// Options of `init`. Every field can also be set by environment variables,
/// which take precedence (DDP_BACKEND, DDP_TIMEOUT_SECONDS).
struct InitOptions {
  /// "nccl", "gloo" or empty for automatic: NCCL when LibTorch was built with
  /// CUDA and NCCL and a GPU is visible, Gloo otherwise.
  std::string backend;
  /// How long a collective or the rendezvous may wait for a peer before every
  /// rank fails with an error naming the problem.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
};

/// Joins the process group described by the environment. Removes
/// `--local_rank N`, `--local_rank=N`, `--local-rank N` and `--local-rank=N`
/// from argv (adjusting argc). Throws std::runtime_error naming the variable
/// on bad values (WORLD_SIZE=abc, RANK >= WORLD_SIZE, unreachable master).
/// Calling it twice is a no-op.
void init(int& argc, char** argv, InitOptions options = {});
/// Same, for programs whose main() takes no arguments.
void init(InitOptions options = {});

/// True once init() ran and world_size() > 1.
bool is_distributed();
bool is_initialized();
Launcher launcher();

int rank();
int world_size();
int local_rank();
int local_world_size();
bool is_main_process(); // rank() == 0

/// The null device ("/dev/null"; "NUL" on Windows).
const char* null_device_path();

/// `path` on the main process, the null device on every other one. ddpify
/// opens the files a program writes through it (`std::ofstream
/// log(ddp::output_path("log.csv"))`, `fopen(ddp::output_path(p), "w")`):
/// every process runs the same code, checks of the stream included, and
/// the file is written once.
inline const char* output_path(const char* path) {
  return is_main_process() ? path : null_device_path();
}
/// The same for a `std::string`, a `std::filesystem::path`, or any path type
/// that can be made from a `const char*`.
template <typename Path> Path output_path(const Path& path) {
  return is_main_process() ? path : Path(null_device_path());
}

/// `stream` on the main process, a stream that discards what it is given on
/// every other one (and stays good). ddpify hands it to code of another
/// file that prints through the `std::ostream&` it is given (`Logger
/// log(ddp::output_stream(std::cout));`): every process runs that code, the
/// values it prints included, and the text appears once.
std::ostream& output_stream(std::ostream& stream);

/// cuda:local_rank() when CUDA is available, else the CPU. Usable before
/// init() (then it reads LOCAL_RANK and friends itself). The environment
/// variable DDP_DEVICE (`cpu`, `cuda`, `cuda:N`) overrides the choice, e.g.
/// DDP_DEVICE=cuda:0 for ranks that share one GPU over Gloo; a device this
/// machine does not have is an error, not a silent fallback.
torch::Device device();

/// This process's device of the kind the program chose: for kCUDA,
/// cuda:local_rank() (DDP_DEVICE overrides it as above); any other kind (the
/// CPU) as it is. What a migrated program spells where it picks its device
/// itself: `ddp::device(torch::cuda::is_available() ? torch::kCUDA :
/// torch::kCPU)`, `ddp::device(device_type)`.
torch::Device device(c10::DeviceType type);

/// The process group, or nullptr when !is_distributed().
c10::intrusive_ptr<c10d::ProcessGroup> process_group();
/// Name of the backend in use ("gloo", "nccl") or "none".
std::string backend_name();

enum class ReduceOp { kSum, kMean, kMax, kMin };

void barrier();

/// In place across ranks. kMean divides by world_size() after the sum.
void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
double all_reduce(double value, ReduceOp op = ReduceOp::kSum);
int64_t all_reduce(int64_t value, ReduceOp op = ReduceOp::kSum);
namespace detail {
/// The type a number travels as in a collective: int64_t for an integer,
/// double for a floating-point value.
template <typename T>
using reduced_as_t = typename std::conditional<std::is_floating_point<T>::value,
                                               double, int64_t>::type;
} // namespace detail
/// Any other number: an `int` or `size_t` count through int64_t, a `float`
/// sum through double, back in its own type (`batches =
/// ddp::all_reduce(batches);`).
template <
    typename T,
    typename std::enable_if<
        std::is_arithmetic<T>::value && !std::is_same<T, bool>::value &&
            !std::is_same<T, double>::value && !std::is_same<T, int64_t>::value,
        int>::type = 0>
T all_reduce(T value, ReduceOp op = ReduceOp::kSum) {
  return static_cast<T>(
      all_reduce(static_cast<detail::reduced_as_t<T>>(value), op));
}
/// In place, element by element: per-class counts and sums kept in a
/// `std::vector`, a `std::array` or a C array of numbers. Integers travel as
/// int64_t, floating-point values as double.
void all_reduce(double* values, size_t count, ReduceOp op = ReduceOp::kSum);
void all_reduce(int64_t* values, size_t count, ReduceOp op = ReduceOp::kSum);

namespace detail {
template <typename T>
void all_reduce_elements(T* values, size_t count, ReduceOp op) {
  static_assert(std::is_arithmetic<T>::value && !std::is_same<T, bool>::value,
                "ddp::all_reduce of a container: its elements must be numbers");
  std::vector<reduced_as_t<T>> wide(values, values + count);
  all_reduce(wide.data(), wide.size(), op);
  for (size_t i = 0; i < count; ++i) {
    values[i] = static_cast<T>(wide[i]);
  }
}
} // namespace detail

template <typename T, typename Allocator>
void all_reduce(std::vector<T, Allocator>& values,
                ReduceOp op = ReduceOp::kSum) {
  detail::all_reduce_elements(values.data(), values.size(), op);
}
template <typename T, size_t N>
void all_reduce(std::array<T, N>& values, ReduceOp op = ReduceOp::kSum) {
  detail::all_reduce_elements(values.data(), N, op);
}
template <typename T, size_t N>
void all_reduce(T (&values)[N], ReduceOp op = ReduceOp::kSum) {
  detail::all_reduce_elements(values, N, op);
}

/// One tensor of the same shape from each rank, in rank order.
std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);
/// In place: every rank ends with src's tensor.
void broadcast(torch::Tensor& tensor, int src = 0);

namespace detail {
uint64_t shared_seed_bits(uint64_t seed);
uint64_t rollout_seed_bits(uint64_t seed);
} // namespace detail

/// The main process's `seed` on every process. A seed drawn at run time
/// (`std::random_device{}()`, `time(nullptr)`) differs by process: ranks
/// that shuffle, or make their data or their episodes, with it would each see
/// another order, and the batches they share out would not be one epoch's.
/// ddpify wraps such seeds (rule R13). Not a collective: ddp::init() draws
/// one job seed on rank 0 and shares it; the n-th call on every rank returns
/// the same value derived from it, so a call may sit anywhere (a loop, an
/// environment's reset, a constructor in another file) as long as the ranks
/// call it in the same order. With one process it returns `seed` itself, so
/// the program draws exactly what it drew before; before init() under a
/// launcher it throws.
template <typename T> T shared_seed(T seed) {
  static_assert(std::is_integral<T>::value && !std::is_same<T, bool>::value,
                "ddp::shared_seed: a seed is an integer");
  return static_cast<T>(detail::shared_seed_bits(static_cast<uint64_t>(seed)));
}

/// Ends this rank's training while its peers may go on stepping (uneven
/// inputs, as PyTorch's DDP `join`): from here until every rank has called
/// join(), this rank takes part in its peers' gradient all-reduces with no
/// gradient of its own (each update is the average over the ranks that took
/// that step), in their buffer broadcasts and sync checks. When the last rank
/// joins, every live wrapper's parameters and buffers are made those of the
/// last rank that stepped, and all return together. A wrapper's destructor
/// and the exit of a process call it too; ddpify inserts it after a training
/// loop whose number of steps may differ by rank. A collective of the
/// program's own (ddp::all_reduce, barrier, ...) made while a peer has
/// joined is an error on every rank, naming it. Without a process group it
/// returns at once.
void join();

/// Destroys the process group (also done at exit).
void shutdown();

} // namespace ddp
