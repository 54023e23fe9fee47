#include "shm_allreduce.h"

#include "join.h"

#include "fault_report.h"

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ddp {
namespace detail {
namespace {

constexpr size_t kPage = 4096;
constexpr int kMaxRanks = 256; // one host: more ranks use the process group

// The first page of the segment. Each rank's region follows, page aligned.
struct Control {
  uint64_t token;
  alignas(64) std::atomic<uint32_t> arrived;
  // Who to check for liveness, and whether this rank may: pids only mean
  // something within one pid namespace.
  alignas(64) int32_t pids[kMaxRanks];
  uint64_t pid_namespaces[kMaxRanks];
};
static_assert(sizeof(Control) <= kPage, "the control block fits one page");
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "a futex needs a plain 32-bit word");

// What rank 0 tells the others: whether it has a segment, and its name.
struct Announcement {
  int32_t ok;
  uint32_t pad;
  uint64_t token;
  char name[48];
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Pids are only comparable within one pid namespace.
uint64_t pid_namespace() {
  struct stat st{};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

// A process that is gone, or a zombie its parent has not reaped yet.
bool exited(pid_t pid) {
  if (::kill(pid, 0) != 0) {
    return errno == ESRCH;
  }
  // read(2), not a std::ifstream: a process that ends between kill() and
  // the read fails it with ESRCH, which libstdc++'s filebuf throws as
  // "basic_filebuf::underflow error reading the file" (seen once in a
  // 2-rank run, in place of the error naming the rank).
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT || errno == ESRCH;
  }
  // The state follows the name, which is at most 16 bytes: the line's first
  // kilobyte holds it.
  char buffer[1024];
  const ssize_t length = ::read(fd, buffer, sizeof(buffer));
  const int error = errno;
  ::close(fd);
  if (length < 0) {
    return error == ESRCH;
  }
  const std::string text(buffer, static_cast<size_t>(length));
  const auto paren = text.rfind(')'); // the name may hold spaces
  return paren != std::string::npos && paren + 2 < text.size() &&
         text[paren + 2] == 'Z';
}

} // namespace

bool shared_memory_allowed_by_env() {
  const char* value = std::getenv("DDP_SHM");
  return value == nullptr || std::string(value) != "0";
}

std::shared_ptr<SharedMemoryGroup>
SharedMemoryGroup::create(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                          int64_t bytes_per_rank,
                          std::chrono::milliseconds timeout) {
  const int rank = group->getRank();
  const int world_size = group->getSize();
  const size_t per_rank = round_up(
      static_cast<size_t>(std::max<int64_t>(bytes_per_rank, 1)), kPage);
  const size_t size = kPage + per_rank * static_cast<size_t>(world_size);

  Announcement announcement{};
  void* base = MAP_FAILED;
  if (rank == 0 && world_size <= kMaxRanks) {
    std::random_device random;
    const uint64_t token =
        (static_cast<uint64_t>(random()) << 32) ^ random() ^
        static_cast<uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count());
    std::snprintf(announcement.name, sizeof(announcement.name),
                  "/ddp-%d-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(token));
    const int fd =
        ::shm_open(announcement.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      // Reserves the pages now: a /dev/shm too small fails here, not with a
      // SIGBUS at the first gradient.
      if (::posix_fallocate(fd, 0, static_cast<off_t>(size)) == 0) {
        base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      }
      ::close(fd);
    }
    if (base != MAP_FAILED) {
      auto* control = new (base) Control();
      control->token = token;
      announcement.ok = 1;
      announcement.token = token;
    } else if (fd >= 0) {
      ::shm_unlink(announcement.name);
    }
  }

  auto announced =
      torch::zeros({static_cast<int64_t>(sizeof(Announcement))}, torch::kUInt8);
  std::memcpy(announced.data_ptr(), &announcement, sizeof(Announcement));
  {
    std::vector<torch::Tensor> tensors{announced};
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    group->broadcast(tensors, options)->wait();
  }
  std::memcpy(&announcement, announced.data_ptr(), sizeof(Announcement));
  announcement.name[sizeof(announcement.name) - 1] = '\0';

  if (rank != 0 && announcement.ok) {
    const int fd = ::shm_open(announcement.name, O_RDWR, 0);
    struct stat st{};
    if (fd >= 0 && ::fstat(fd, &st) == 0 &&
        static_cast<size_t>(st.st_size) == size) {
      base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (fd >= 0) {
      ::close(fd);
    }
    // Same name, other machine's segment? The token tells.
    if (base != MAP_FAILED &&
        static_cast<Control*>(base)->token != announcement.token) {
      ::munmap(base, size);
      base = MAP_FAILED;
    }
  }
  if (base != MAP_FAILED) {
    auto* control = static_cast<Control*>(base);
    control->pids[rank] = static_cast<int32_t>(::getpid());
    control->pid_namespaces[rank] = pid_namespace();
  }

  // Every rank must have it, or none uses it.
  auto ok = torch::tensor({base != MAP_FAILED ? 1 : 0}, torch::kInt);
  {
    std::vector<torch::Tensor> tensors{ok};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MIN;
    group->allreduce(tensors, options)->wait();
  }
  if (rank == 0 && announcement.ok) {
    ::shm_unlink(announcement.name); // every rank has opened it, or never will
  }
  if (ok.item<int>() == 0) {
    if (base != MAP_FAILED) {
      ::munmap(base, size);
    }
    return nullptr;
  }
  return std::shared_ptr<SharedMemoryGroup>(new SharedMemoryGroup(
      base, size, rank, world_size, static_cast<int64_t>(per_rank), timeout));
}

SharedMemoryGroup::SharedMemoryGroup(void* base, size_t size, int rank,
                                     int world_size, int64_t bytes_per_rank,
                                     std::chrono::milliseconds timeout)
    : base_(base), size_(size), rank_(rank), world_size_(world_size),
      bytes_per_rank_(bytes_per_rank), timeout_(timeout) {}

SharedMemoryGroup::~SharedMemoryGroup() { ::munmap(base_, size_); }

void* SharedMemoryGroup::region(int rank) const {
  return static_cast<char*>(base_) + kPage +
         static_cast<size_t>(bytes_per_rank_) * static_cast<size_t>(rank);
}

// All ranks arrive at the same barriers in the same order, so one counter
// that only grows serves them all: barrier k is passed once it reaches
// k * world_size (modulo 2^32). Waiters sleep on it with a futex.
void SharedMemoryGroup::barrier(const char* where) {
  auto* control = static_cast<Control*>(base_);
  auto* word = reinterpret_cast<uint32_t*>(&control->arrived);
  const uint32_t target =
      (barriers_passed_ + 1) * static_cast<uint32_t>(world_size_);
  const uint32_t now =
      control->arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (now == target) {
    ::syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int round = 0;; ++round) {
      const uint32_t seen = control->arrived.load(std::memory_order_acquire);
      if (static_cast<int32_t>(seen - target) >= 0) {
        break;
      }
      if (round < 32) {
        std::this_thread::yield();
        continue;
      }
      const auto left = deadline - std::chrono::steady_clock::now();
      // Where this rank waits, for a joined peer and for desyncs (join.h).
      on_slow_wait(timeout_ - left);
      // A peer that exited never arrives: say so now, not at the timeout.
      for (int peer = 0; peer < world_size_; ++peer) {
        const pid_t pid = control->pids[peer];
        if (peer != rank_ && pid > 0 &&
            control->pid_namespaces[peer] == control->pid_namespaces[rank_] &&
            exited(pid)) {
          std::ostringstream message;
          message << "ddp::DistributedDataParallel: rank " << peer << " (pid "
                  << pid << ") exited during " << where << "; rank " << rank_
                  << " of " << world_size_ << " cannot go on";
          // Ended for a desync: that is what to say (join.h).
          on_peer_failure();
          // A consequence of the peer's failure, for the launcher.
          record_failure(message.str(), FailureKind::kCollective);
          throw std::runtime_error(message.str());
        }
      }
      if (left <= std::chrono::steady_clock::duration::zero()) {
        std::ostringstream message;
        message << "ddp::DistributedDataParallel: rank " << rank_ << " of "
                << world_size_ << " waited "
                << std::chrono::duration<double>(timeout_).count()
                << " s for the other ranks in " << where
                << " (a peer is stuck, or did not run the same backward pass)";
        record_failure(message.str(), FailureKind::kCollective);
        throw std::runtime_error(message.str());
      }
      const auto slice = std::min<std::chrono::steady_clock::duration>(
          left, std::chrono::milliseconds(100));
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
      timespec wait{static_cast<time_t>(ns / 1000000000),
                    static_cast<long>(ns % 1000000000)};
      ::syscall(SYS_futex, word, FUTEX_WAIT, seen, &wait, nullptr, 0);
    }
  }
  ++barriers_passed_;
}

namespace {

// Sums this rank's share of every region in rank order and writes the
// result back into every region; `averaged` elements are divided first.
template <typename T>
void reduce_share(const std::vector<T*>& regions, int64_t begin, int64_t end,
                  int64_t averaged) {
  const size_t n = regions.size();
  const T divisor = static_cast<T>(n);
  if (n == 2) {
    T* __restrict a = regions[0];
    T* __restrict b = regions[1];
    const int64_t split = std::clamp(averaged, begin, end);
    for (int64_t i = begin; i < split; ++i) {
      const T value = (a[i] + b[i]) / divisor;
      a[i] = value;
      b[i] = value;
    }
    for (int64_t i = split; i < end; ++i) {
      const T value = a[i] + b[i];
      a[i] = value;
      b[i] = value;
    }
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    T value = regions[0][i];
    for (size_t k = 1; k < n; ++k) {
      value += regions[k][i];
    }
    if (i < averaged) {
      value /= divisor;
    }
    for (size_t k = 0; k < n; ++k) {
      regions[k][i] = value;
    }
  }
}

} // namespace

std::pair<int64_t, int64_t>
SharedMemoryGroup::share(int64_t numel, c10::ScalarType dtype) const {
  // In whole cache lines: no two ranks write one line.
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t align = std::max<int64_t>(1, 64 / element);
  const int64_t size =
      (numel + world_size_ - 1) / world_size_ / align * align + align;
  const int64_t begin = std::min(numel, size * rank_);
  return {begin, std::min(numel, begin + size)};
}

void SharedMemoryGroup::allreduce(int64_t offset, int64_t numel,
                                  int64_t averaged, c10::ScalarType dtype) {
  // Every rank's elements are in place.
  barrier("a gradient all-reduce through shared memory");
  const auto [begin, end] = share(numel, dtype);
  if (begin < end) {
    if (dtype == c10::kFloat || dtype == c10::kDouble) {
      AT_DISPATCH_FLOATING_TYPES(dtype, "ddp_shm_allreduce", [&] {
        std::vector<scalar_t*> regions;
        for (int r = 0; r < world_size_; ++r) {
          regions.push_back(reinterpret_cast<scalar_t*>(
              static_cast<char*>(region(r)) + offset));
        }
        reduce_share(regions, begin, end, averaged);
      });
    } else {
      // Other dtypes (half, bfloat16, integers): the same through tensors.
      std::vector<torch::Tensor> views;
      for (int r = 0; r < world_size_; ++r) {
        views.push_back(torch::from_blob(static_cast<char*>(region(r)) + offset,
                                         {numel}, torch::dtype(dtype))
                            .slice(0, begin, end));
      }
      auto sum = views[0].clone();
      for (int r = 1; r < world_size_; ++r) {
        sum.add_(views[r]);
      }
      const int64_t split = std::clamp(averaged, begin, end) - begin;
      if (split > 0) {
        auto part = sum.narrow(0, 0, split);
        if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
          part.copy_(part.div(world_size_, "trunc"));
        } else {
          part.div_(world_size_);
        }
      }
      for (auto& view : views) {
        view.copy_(sum);
      }
    }
  }
  // Every share is written: the regions hold the result.
  barrier("a gradient all-reduce through shared memory");
}

void SharedMemoryGroup::broadcast(int64_t offset, int64_t numel, int root,
                                  int64_t averaged, int64_t divisor,
                                  c10::ScalarType dtype) {
  // The root's elements are in place.
  barrier("a broadcast through shared memory");
  const auto [begin, end] = share(numel, dtype);
  if (begin < end) {
    // This rank's share of the root's elements (read before any region is
    // written), divided where asked, into every region.
    auto view = [&](int r) {
      return torch::from_blob(static_cast<char*>(region(r)) + offset, {numel},
                              torch::dtype(dtype))
          .slice(0, begin, end);
    };
    auto value = view(root).clone();
    const int64_t split = std::clamp(averaged, begin, end) - begin;
    if (split > 0 && divisor > 1) {
      auto part = value.narrow(0, 0, split);
      if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
        part.copy_(part.div(divisor, "trunc"));
      } else {
        part.div_(divisor);
      }
    }
    for (int r = 0; r < world_size_; ++r) {
      view(r).copy_(value);
    }
  }
  barrier("a broadcast through shared memory");
}

struct SharedMemoryWorker::Queue {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::packaged_task<void()>> tasks;
  bool stop = false;
};

SharedMemoryWorker::SharedMemoryWorker(std::shared_ptr<SharedMemoryGroup> group)
    : group_(std::move(group)), queue_(std::make_shared<Queue>()) {
  std::thread([queue = queue_, group = group_] {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(queue->mutex);
        queue->ready.wait(lock,
                          [&] { return queue->stop || !queue->tasks.empty(); });
        if (queue->tasks.empty()) {
          return;
        }
        task = std::move(queue->tasks.front());
        queue->tasks.pop_front();
      }
      task();
    }
  }).detach();
}

SharedMemoryWorker::~SharedMemoryWorker() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stop = true;
  }
  queue_->ready.notify_one();
}

std::future<void> SharedMemoryWorker::run(std::function<void()> work) {
  std::packaged_task<void()> task(std::move(work));
  auto done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->tasks.push_back(std::move(task));
  }
  queue_->ready.notify_one();
  return done;
}

std::future<void> SharedMemoryWorker::allreduce(int64_t offset, int64_t numel,
                                                int64_t averaged,
                                                c10::ScalarType dtype) {
  return run([group = group_, offset, numel, averaged, dtype] {
    group->allreduce(offset, numel, averaged, dtype);
  });
}

} // namespace detail
} // namespace ddp
