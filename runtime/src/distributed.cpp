// Process group, environment and collective helpers of the ddp runtime.

#include <ddp/distributed.h>

#include "c10d_compat.h"
#include "env_launcher.h"
#include "fault_report.h"
#include "join.h"
#include "libtorch_logging.h"
#include "profile.h"
#include "subgroups.h"
#include "unwrapped_check.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#if defined(DDP_WITH_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

namespace ddp {
namespace {

struct State {
  std::mutex mutex;
  bool initialized = false;
  detail::EnvConfig env;
  std::string backend = "none";
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  // ddp::shared_seed: rank 0's draw at init, and the calls made since.
  uint64_t job_seed = 0;
  std::atomic<uint64_t> shared_seeds{0};
  // ddp::rollout_seed's calls: a stream apart from shared_seed's.
  std::atomic<uint64_t> rollout_seeds{0};
};

State& state() {
  // Never destroyed: the group's threads may outlive static destruction.
  static State* s = new State();
  return *s;
}

Launcher to_launcher(detail::LauncherKind kind) {
  switch (kind) {
  case detail::LauncherKind::kTorchrun:
    return Launcher::kTorchrun;
  case detail::LauncherKind::kSlurm:
    return Launcher::kSlurm;
  case detail::LauncherKind::kOpenMPI:
    return Launcher::kOpenMPI;
  case detail::LauncherKind::kNone:
    break;
  }
  return Launcher::kNone;
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  const double seconds = timeout.count() / 1000.0;
  std::string text = std::to_string(seconds);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') {
    text.pop_back();
  }
  return text + " s";
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" ||
         addr.compare(0, 4, "127.") == 0;
}

bool nccl_compiled() {
#if defined(DDP_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

std::string choose_backend(const detail::EnvConfig& env) {
  const bool cuda = torch::cuda::is_available();
  if (env.backend == "nccl") {
    if (!nccl_compiled()) {
      throw std::runtime_error(
          "ddp::init: backend nccl requested (DDP_BACKEND or "
          "InitOptions.backend) but this LibTorch was built without "
          "CUDA/NCCL; use gloo");
    }
    if (!cuda) {
      throw std::runtime_error(
          "ddp::init: backend nccl requested (DDP_BACKEND or "
          "InitOptions.backend) but no CUDA device is visible; use gloo");
    }
    return "nccl";
  }
  if (env.backend == "gloo") {
    return "gloo";
  }
  return (nccl_compiled() && cuda) ? "nccl" : "gloo";
}

/// Where rank 0's store listens: MASTER_ADDR, so other interfaces stay
/// closed; every interface ("") when, in a job of several hosts, MASTER_ADDR
/// names this host by a loopback address (Debian's /etc/hosts maps the
/// host name to 127.0.1.1) and the other hosts reach it by another one.
std::string store_listen_address(const detail::EnvConfig& env) {
  if (env.world_size > env.local_world_size &&
      detail::name_on_loopback(env.master_addr)) {
    std::cerr << "ddp: MASTER_ADDR=" << env.master_addr
              << " is a loopback address on this host (/etc/hosts?): rank 0's "
                 "store listens on every interface, as other hosts reach it "
                 "by another address\n";
    return "";
  }
  return env.master_addr;
}

c10::intrusive_ptr<c10d::Store> make_store(const detail::EnvConfig& env) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.timeout = env.timeout;
  if (env.use_agent_store) {
    // torchrun's agent runs the store; workers are clients under a prefix.
    options.isServer = false;
    options.waitWorkers = false;
  } else {
    options.isServer = env.rank == 0;
    options.numWorkers = static_cast<std::size_t>(env.world_size);
    options.waitWorkers = true;
  }
  if (!options.isServer) {
    detail::wait_until_listening(
        env.master_addr, env.master_port,
        std::chrono::duration_cast<std::chrono::milliseconds>(env.timeout)
            .count());
  }
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = options.isServer
                ? detail::compat::make_server_store(
                      env.master_addr, store_listen_address(env), options)
                : c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    const std::string what = detail::describe(e);
    if (options.isServer) {
      throw std::runtime_error(
          "ddp::init: rank 0 could not start the rendezvous store on "
          "MASTER_PORT=" +
          std::to_string(env.master_port) + " or not all " +
          std::to_string(env.world_size) +
          " processes (WORLD_SIZE) joined "
          "within the timeout of " +
          seconds_text(env.timeout) + ": " + what);
    }
    const std::string message =
        "ddp::init: rank " + std::to_string(env.rank) +
        " could not reach the master at MASTER_ADDR=" + env.master_addr +
        " MASTER_PORT=" + std::to_string(env.master_port) +
        " within the timeout of " + seconds_text(env.timeout) + ": " + what;
    // Rank 0's store is missing: a consequence of what happened there.
    detail::record_failure(message, detail::FailureKind::kCollective);
    throw std::runtime_error(message);
  }
  if (env.use_agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, store);
  }
  return store;
}

/// The local address a packet to host:port leaves from ("" if unknown). A
/// connected UDP socket sends nothing; the kernel only picks the route.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                    &found) != 0 ||
      found == nullptr) {
    return "";
  }
  std::string result;
  for (addrinfo* a = found; a != nullptr && result.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {0};
      const void* raw =
          local.ss_family == AF_INET
              ? static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) {
        result = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return result;
}

std::shared_ptr<::gloo::transport::Device>
gloo_device(const detail::EnvConfig& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    if (*ifname != '\0') {
      return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    }
  }
  if (is_loopback(env.master_addr)) {
    // Every rank on this host: talk over loopback whatever the hostname
    // resolves to.
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  // The address of the interface that routes to the master: reachable by
  // the other nodes, unlike the 127.0.1.1 that a host name often resolves to.
  const auto local = local_address_towards(env.master_addr, env.master_port);
  if (!local.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

/// The device DDP_DEVICE names; throws for a malformed name or a device this
/// machine does not have.
torch::Device forced_device(const std::string& name) {
  c10::optional<torch::Device> parsed;
  try {
    parsed = torch::Device(name);
  } catch (const std::exception&) {
    throw std::runtime_error("ddp::device: DDP_DEVICE=" + name +
                             " is not a device (cpu, cuda, cuda:N)");
  }
  if (parsed->is_cuda()) {
    const auto count = torch::cuda::device_count();
    const auto index = parsed->has_index() ? parsed->index() : 0;
    if (count == 0 || index >= static_cast<c10::DeviceIndex>(count)) {
      throw std::runtime_error("ddp::device: DDP_DEVICE=" + name + " but " +
                               std::to_string(count) +
                               " CUDA devices are visible");
    }
    return torch::Device(torch::kCUDA, index);
  }
  return *parsed;
}

using detail::compat::BackendPtr;

BackendPtr make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                     const detail::EnvConfig& env) {
  auto options = c10d::ProcessGroupGloo::Options::create(env.timeout);
  options->devices.push_back(gloo_device(env));
  options->threads = 2;
  // Gloo connects every peer here; the 2.x Gloo prints a line to std::cout
  // when it has (libtorch_logging.h).
  const detail::GlooConnectQuiet quiet;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank,
                                                     env.world_size, options);
}

#if defined(DDP_WITH_NCCL)
BackendPtr make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                     const detail::EnvConfig& env) {
  const int count = static_cast<int>(torch::cuda::device_count());
  if (env.local_rank >= count) {
    throw std::runtime_error(
        "ddp::init: LOCAL_RANK=" + std::to_string(env.local_rank) +
        " but only " + std::to_string(count) +
        " CUDA devices are visible: start at most that many processes per "
        "node");
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(
      store, env.rank, env.world_size,
      detail::compat::nccl_options(env.timeout));
}
#endif

/// Wraps a backend into the c10d::ProcessGroup that process_group() returns.
c10::intrusive_ptr<c10d::ProcessGroup>
make_group(const c10::intrusive_ptr<c10d::Store>& store,
           const detail::EnvConfig& env, const std::string& name) {
  BackendPtr backend;
#if defined(DDP_WITH_NCCL)
  if (name == "nccl") {
    backend = make_nccl(store, env);
  } else
#endif
  {
    backend = make_gloo(store, env);
  }
  return detail::compat::make_process_group(
      store, env.rank, env.world_size, name == "nccl", backend, env.timeout);
}

void at_exit() {
  // The group and the store are deliberately not destroyed here: a
  // destructor waiting for a peer that already exited would hang the exit.
  // The OS closes the sockets.
  auto& s = state();
  if (s.group) {
    s.group.release();
  }
  if (s.store) {
    s.store.release();
  }
}

/// The group for a collective; nullptr in a world of one process. Throws
/// after shutdown() in a world of several: a silent no-op would give each
/// rank its own, wrong, result.
c10::intrusive_ptr<c10d::ProcessGroup> group_for(const char* what_op) {
  auto& s = state();
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.group && !s.initialized && s.env.world_size > 1) {
      throw std::runtime_error(std::string("ddp::") + what_op +
                               ": the process group was shut down");
    }
    group = s.group;
  }
  if (group) {
    // While a peer has joined, an error on every rank (ddp::join).
    detail::announce_program_collective(
        (std::string("ddp::") + what_op).c_str());
  }
  return group;
}

[[noreturn]] void rethrow_collective(const char* what_op,
                                     const std::exception& e) {
  detail::collective_failed((std::string("ddp::") + what_op).c_str(), e);
}

} // namespace

c10::intrusive_ptr<c10d::Store> detail::job_store() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.store;
}

std::chrono::milliseconds detail::collective_timeout() {
  return state().env.timeout;
}

c10::intrusive_ptr<c10d::ProcessGroup>
detail::new_gloo_subgroup(const std::vector<int>& ranks,
                          const std::string& name) {
  auto& s = state();
  const auto member = std::find(ranks.begin(), ranks.end(), s.env.rank);
  if (member == ranks.end() || !s.store) {
    return {};
  }
  detail::EnvConfig env = s.env;
  env.rank = static_cast<int>(member - ranks.begin());
  env.world_size = static_cast<int>(ranks.size());
  auto store =
      c10::make_intrusive<c10d::PrefixStore>("ddp_subgroup_" + name, s.store);
  try {
    return detail::compat::make_process_group(store, env.rank, env.world_size,
                                              false, make_gloo(store, env),
                                              env.timeout);
  } catch (const std::exception& e) {
    collective_failed(("ddp: process group '" + name + "'").c_str(), e);
  }
}

int64_t detail::shared_memory_host_key() {
  std::string key = host_name();
  struct stat shm{};
  if (::stat("/dev/shm", &shm) == 0) {
    key += "|" + std::to_string(static_cast<unsigned long long>(shm.st_dev));
  }
  // FNV-1a: a number every rank can all-gather.
  uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : key) {
    hash = (hash ^ c) * 1099511628211ull;
  }
  return static_cast<int64_t>(hash >> 1);
}

void detail::collective_failed(const char* what_op, const std::exception& e) {
  const auto& s = state();
  const std::string message =
      std::string(what_op) + " failed on rank " + std::to_string(s.env.rank) +
      " of " + std::to_string(s.env.world_size) + " on " + host_name() +
      " (a peer process exited, or did not reach the same collective within "
      "the timeout of " +
      seconds_text(s.env.timeout) + "): " + describe(e);
  record_failure(message, FailureKind::kCollective);
  throw CollectiveError(message);
}

namespace {

void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what_op) {
  const detail::profile::CollectiveTimer timer;
  const auto at =
      detail::begin_collective((std::string("ddp::") + what_op).c_str());
  try {
    detail::wait_collective(work, at);
  } catch (const detail::PositionsError&) {
    throw; // names every rank's position already
  } catch (const std::exception& e) {
    rethrow_collective(what_op, e);
  }
}

torch::Device backend_device() {
  return backend_name() == "nccl" ? device() : torch::Device(torch::kCPU);
}

/// Whether a collective can use the tensor's storage directly: Gloo takes
/// CPU (and, built with CUDA, GPU) tensors; NCCL only GPU tensors.
bool on_backend_device(const torch::Tensor& tensor) {
  return backend_name() != "nccl" || tensor.is_cuda();
}

torch::Device backend_device_for(const torch::Tensor& tensor) {
  return on_backend_device(tensor) ? tensor.device() : backend_device();
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
  case ReduceOp::kMax:
    return c10d::ReduceOp::MAX;
  case ReduceOp::kMin:
    return c10d::ReduceOp::MIN;
  case ReduceOp::kSum:
  case ReduceOp::kMean:
    break;
  }
  return c10d::ReduceOp::SUM;
}

} // namespace

namespace {
// Rank 0 draws the seed ddp::shared_seed derives its values from; the others
// read it from the store (get waits until it is set, within the timeout).
uint64_t share_job_seed(c10d::Store& store, int rank) {
  constexpr const char* kKey = "ddp_job_seed";
  if (rank == 0) {
    std::random_device device;
    const uint64_t seed = (static_cast<uint64_t>(device()) << 32) ^ device();
    const std::string text = std::to_string(seed);
    store.set(kKey, std::vector<uint8_t>(text.begin(), text.end()));
    return seed;
  }
  const auto bytes = store.get(kKey);
  return std::stoull(std::string(bytes.begin(), bytes.end()));
}
} // namespace

void init(int& argc, char** argv, InitOptions options) {
  const auto local_rank_arg = detail::strip_local_rank(argc, argv);
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.initialized) {
    return;
  }
  detail::profile::init_started();
  auto env =
      detail::read_environment(detail::process_environment(), local_rank_arg,
                               options.backend, options.timeout);
  if (env.world_size > 1 || env.group_of_one) {
    detail::configure_libtorch_logging();
    detail::install_fault_handler(env.rank, env.world_size);
    const auto name = choose_backend(env);
    auto store = make_store(env);
    // Before the group: once every rank has connected it, every rank holds
    // the seed, and none needs rank 0's store for it later.
    uint64_t job_seed = 0;
    try {
      job_seed = share_job_seed(*store, env.rank);
    } catch (const std::exception& e) {
      throw std::runtime_error("ddp::init: rank " + std::to_string(env.rank) +
                               " could not share the job's seed through rank "
                               "0's store: " +
                               detail::describe(e));
    }
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    try {
      // The group's own keys live under a prefix of their own.
      group = make_group(
          c10::make_intrusive<c10d::PrefixStore>("ddp_default_pg", store), env,
          name);
    } catch (const std::runtime_error&) {
      throw;
    } catch (const std::exception& e) {
      const std::string what = detail::describe(e);
      throw std::runtime_error(
          "ddp::init: rank " + std::to_string(env.rank) +
          " could not connect the " + name + " process group of " +
          std::to_string(env.world_size) + " processes within the timeout of " +
          seconds_text(env.timeout) + ": " + what);
    }
    s.store = store;
    s.group = group;
    s.backend = name;
    s.job_seed = job_seed;
    static bool registered = false;
    if (!registered) {
      registered = true;
      std::atexit(at_exit);
    }
    detail::arm_unwrapped_check(env.rank, env.world_size);
  } else {
    s.backend = "none";
  }
  s.env = env;
  s.initialized = true;
  detail::profile::init_finished(env.rank, env.world_size);
}

void init(InitOptions options) {
  int argc = 0;
  init(argc, nullptr, std::move(options));
}

bool is_initialized() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.initialized;
}

bool is_distributed() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // A group exists in a world of several, or of one with DDP_GROUP_OF_ONE.
  return s.initialized && s.group;
}

Launcher launcher() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return to_launcher(s.env.launcher);
}

namespace {
/// Before init() (a static object's constructor that prints, before main):
/// what the launcher's environment says, quietly; one process without one.
detail::EnvConfig environment_before_init() {
  try {
    return detail::read_environment(detail::process_environment(), std::nullopt,
                                    "", std::chrono::minutes(1));
  } catch (const std::exception&) {
    return detail::EnvConfig{};
  }
}
} // namespace

int rank() {
  auto& s = state();
  return s.initialized ? s.env.rank : environment_before_init().rank;
}
int world_size() {
  auto& s = state();
  return s.initialized ? s.env.world_size
                       : environment_before_init().world_size;
}
int local_rank() {
  auto& s = state();
  return s.initialized ? s.env.local_rank
                       : environment_before_init().local_rank;
}
int local_world_size() { return state().env.local_world_size; }
bool is_main_process() { return rank() == 0; }

const char* null_device_path() {
#ifdef _WIN32
  return "NUL";
#else
  return "/dev/null";
#endif
}

namespace {
/// Takes every character and keeps none: a stream over it stays good.
class DiscardingBuffer : public std::streambuf {
protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize count) override {
    return count;
  }
};
} // namespace

std::ostream& output_stream(std::ostream& stream) {
  if (is_main_process()) {
    return stream;
  }
  static DiscardingBuffer buffer;
  static std::ostream discarding(&buffer);
  return discarding;
}

torch::Device device() {
  if (const char* forced = std::getenv("DDP_DEVICE")) {
    if (*forced != '\0') {
      return forced_device(forced);
    }
  }
  if (torch::cuda::is_available()) {
    return torch::Device(torch::kCUDA,
                         static_cast<c10::DeviceIndex>(local_rank()));
  }
  return torch::Device(torch::kCPU);
}

torch::Device device(c10::DeviceType type) {
  if (type != torch::kCUDA) {
    return torch::Device(type);
  }
  if (const char* forced = std::getenv("DDP_DEVICE")) {
    if (*forced != '\0') {
      return forced_device(forced);
    }
  }
  return torch::Device(torch::kCUDA,
                       static_cast<c10::DeviceIndex>(local_rank()));
}

c10::intrusive_ptr<c10d::ProcessGroup> process_group() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.group;
}

std::string backend_name() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.group ? s.backend : "none";
}

void barrier() {
  auto group = group_for("barrier");
  if (!group) {
    return;
  }
  // An all-reduce of one element: works on every backend and version.
  auto flag = torch::zeros(
      {1}, torch::TensorOptions().dtype(torch::kInt).device(backend_device()));
  std::vector<at::Tensor> tensors{flag};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = group->allreduce(tensors);
  } catch (const std::exception& e) {
    rethrow_collective("barrier", e);
  }
  wait(work, "barrier");
}

void all_reduce(torch::Tensor& tensor, ReduceOp op) {
  auto group = group_for("all_reduce");
  if (!group) {
    return; // one process: the value is already the reduction
  }
  if (!tensor.defined()) {
    throw std::invalid_argument("ddp::all_reduce: undefined tensor");
  }
  torch::NoGradGuard no_grad;
  // The collective needs a contiguous tensor on the backend's device (NCCL:
  // the GPU); anything else goes through a copy.
  const bool direct = tensor.is_contiguous() && on_backend_device(tensor);
  std::vector<at::Tensor> tensors{
      direct ? tensor : tensor.to(backend_device_for(tensor)).contiguous()};
  c10d::AllreduceOptions options;
  options.reduceOp = to_c10d(op);
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = group->allreduce(tensors, options);
  } catch (const std::exception& e) {
    rethrow_collective("all_reduce", e);
  }
  wait(work, "all_reduce");
  if (!direct) {
    tensor.copy_(tensors[0]);
  }
  if (op == ReduceOp::kMean) {
    if (tensor.is_floating_point() || tensor.is_complex()) {
      tensor.div_(world_size());
    } else {
      tensor.copy_(tensor.div(world_size(), "trunc"));
    }
  }
}

double all_reduce(double value, ReduceOp op) {
  if (!group_for("all_reduce")) {
    return value;
  }
  auto tensor = torch::full(
      {1}, value,
      torch::TensorOptions().dtype(torch::kFloat64).device(backend_device()));
  all_reduce(tensor, op);
  return tensor.item<double>();
}

int64_t all_reduce(int64_t value, ReduceOp op) {
  if (!group_for("all_reduce")) {
    return value;
  }
  auto tensor = torch::full(
      {1}, value,
      torch::TensorOptions().dtype(torch::kInt64).device(backend_device()));
  all_reduce(tensor, op);
  return tensor.item<int64_t>();
}

namespace {

template <typename T>
void all_reduce_buffer(T* values, size_t count, ReduceOp op,
                       torch::ScalarType type) {
  if (!group_for("all_reduce") || count == 0) {
    return;
  }
  auto tensor = torch::from_blob(values, {static_cast<int64_t>(count)},
                                 torch::TensorOptions().dtype(type))
                    .to(backend_device(), /*non_blocking=*/false,
                        /*copy=*/true);
  all_reduce(tensor, op);
  auto host = tensor.to(torch::kCPU).contiguous();
  const T* reduced = static_cast<const T*>(host.data_ptr());
  std::copy(reduced, reduced + count, values);
}

} // namespace

void all_reduce(double* values, size_t count, ReduceOp op) {
  all_reduce_buffer(values, count, op, torch::kFloat64);
}

void all_reduce(int64_t* values, size_t count, ReduceOp op) {
  all_reduce_buffer(values, count, op, torch::kInt64);
}

std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) {
  auto group = group_for("all_gather");
  if (!group) {
    return {tensor};
  }
  if (!tensor.defined()) {
    throw std::invalid_argument("ddp::all_gather: undefined tensor");
  }
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> inputs{
      tensor.to(backend_device_for(tensor)).contiguous()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < world_size(); ++i) {
    outputs[0].push_back(torch::empty_like(inputs[0]));
  }
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = group->allgather(outputs, inputs);
  } catch (const std::exception& e) {
    rethrow_collective("all_gather", e);
  }
  wait(work, "all_gather");
  if (!on_backend_device(tensor)) {
    for (auto& t : outputs[0]) {
      t = t.to(tensor.device());
    }
  }
  return outputs[0];
}

namespace {
// The n-th value of a stream derived from the job seed (splitmix64), or
// nullopt where one process runs: it keeps the seed it drew. `who` names the
// call in the error before init() under a launcher.
std::optional<uint64_t> job_seed_draw(std::atomic<uint64_t> State::* counter,
                                      uint64_t stream, const char* who) {
  if (!is_initialized()) {
    int launched = 1;
    try {
      launched =
          detail::read_environment(detail::process_environment(), std::nullopt,
                                   "", std::chrono::minutes(1))
              .world_size;
    } catch (const std::exception&) {
      launched = 2; // A launcher's variables, though malformed.
    }
    if (launched > 1) {
      throw std::runtime_error(std::string(who) +
                               ": called before ddp::init() in a job of "
                               "several processes; draw the seed after "
                               "ddp::init()");
    }
    return std::nullopt;
  }
  auto& s = state();
  if (!s.group || s.env.world_size <= 1) {
    return std::nullopt;
  }
  const uint64_t n = (s.*counter).fetch_add(1, std::memory_order_relaxed);
  uint64_t z = (s.job_seed ^ stream) + (n + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
} // namespace

uint64_t detail::shared_seed_bits(uint64_t seed) {
  // The n-th call on every rank: the same value.
  return job_seed_draw(&State::shared_seeds, 0, "ddp::shared_seed")
      .value_or(seed);
}

uint64_t detail::rollout_seed_bits(uint64_t seed) {
  // A stream of its own: the ranks call ddp::rollout_seed as often as their
  // own episodes need, which must not shift ddp::shared_seed's n-th value.
  return job_seed_draw(&State::rollout_seeds, 0xD1B54A32D192ED03ULL,
                       "ddp::rollout_seed")
      .value_or(seed);
}

void broadcast(torch::Tensor& tensor, int src) {
  auto group = group_for("broadcast");
  if (src < 0 || src >= world_size()) {
    throw std::invalid_argument("ddp::broadcast: src=" + std::to_string(src) +
                                " is not a rank (world size " +
                                std::to_string(world_size()) + ")");
  }
  if (!group) {
    return;
  }
  if (!tensor.defined()) {
    throw std::invalid_argument("ddp::broadcast: undefined tensor");
  }
  torch::NoGradGuard no_grad;
  const bool direct = tensor.is_contiguous() && on_backend_device(tensor);
  std::vector<at::Tensor> tensors{
      direct ? tensor : tensor.to(backend_device_for(tensor)).contiguous()};
  c10d::BroadcastOptions options;
  options.rootRank = src;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = group->broadcast(tensors, options);
  } catch (const std::exception& e) {
    rethrow_collective("broadcast", e);
  }
  wait(work, "broadcast");
  if (!direct) {
    tensor.copy_(tensors[0]);
  }
}

void shutdown() {
  // The end-of-training sync check of the wrappers that outlive the group
  // (ddp::distribute's), while it still exists.
  detail::check_live_wrappers_at_end();
  auto& s = state();
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  c10::intrusive_ptr<c10d::Store> store;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    group = std::move(s.group);
    store = std::move(s.store);
    s.group.reset();
    s.store.reset();
    s.backend = "none";
    // init() may run again; until then collectives in a world of several
    // processes throw instead of silently doing nothing.
    s.initialized = false;
  }
  group.reset(); // joins the backend's threads
  store.reset();
}

} // namespace ddp
