// ddp::join and the waits that name desyncs (join.h).

#include "join.h"

#include "env_launcher.h"
#include "fault_report.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace ddp {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;

// A wait shorter than this never touches the store: the fast path.
constexpr auto kPublishAfter = std::chrono::milliseconds(20);
// How often a slow wait looks for a peer's abort, and compares positions.
constexpr auto kAbortPoll = std::chrono::milliseconds(200);
constexpr auto kComparePeriod = std::chrono::milliseconds(1000);
// How often ddp::join() looks for a stepping peer's position.
constexpr auto kJoinPoll = std::chrono::milliseconds(10);

// DDP_DESYNC_SECONDS: how long a rank waits in a collective before it
// compares its position with its peers' (0: never).
std::chrono::milliseconds desync_after() {
  static const std::chrono::milliseconds after = [] {
    const char* text = std::getenv("DDP_DESYNC_SECONDS");
    if (text == nullptr || *text == '\0') {
      return std::chrono::milliseconds(3000);
    }
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    TORCH_CHECK(end != text && *end == '\0' && seconds >= 0,
                "ddp: DDP_DESYNC_SECONDS='", text,
                "' is not a number of seconds: use 0 (off) or a positive "
                "number");
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }();
  return after;
}

// The header of a synchronised backward pass while a rank has joined, one
// MAX all-reduce. Fields with a sign twin tell whether the stepping ranks
// agree (max of x == -max of -x); joined ranks give kNone to all of them.
enum HeaderField : int64_t {
  kStepping,
  kKind,
  kKindNeg,
  kWrapper,
  kWrapperNeg,
  kStep,
  kStepNeg,
  kLowestStepperNeg,
  kProgramCode,
  kAuthority,
  kHeaderFields
};
enum HeaderKind : int64_t { kBackward = 1, kProgram = 2 };
constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;
// The authority field: own backward passes, then the lowest rank among
// those with the most (the rank whose parameters are the final ones).
constexpr int64_t kRankSpan = int64_t{1} << 20;

// What a program collective is called in a header.
const std::vector<std::string>& program_collectives() {
  static const std::vector<std::string> names{
      "a collective",    "ddp::all_reduce",
      "ddp::all_gather", "ddp::broadcast",
      "ddp::barrier",    "the construction of a DistributedDataParallel"};
  return names;
}
int64_t program_code(const char* what) {
  const auto& names = program_collectives();
  const auto at = std::find(names.begin(), names.end(), what);
  return at == names.end() ? 0 : at - names.begin();
}

struct JoinState {
  std::atomic<uint64_t> seq{0};
  std::atomic<bool> peers_joined{false};
  std::atomic<int64_t> own_backwards{0};
  std::mutex mutex; // join() and the participants
  bool joined = false;
  uint64_t epoch = 0;
  JoinParticipants participants;
  std::mutex store_mutex; // one store request at a time
  c10::intrusive_ptr<c10d::Store> store;
  const c10d::Store* base = nullptr;
};

JoinState& join_state() {
  // Never destroyed: waits at exit still use it.
  static auto* s = new JoinState;
  return *s;
}

c10::intrusive_ptr<c10d::Store> positions_store() {
  auto& s = join_state();
  auto base = job_store();
  std::lock_guard<std::mutex> lock(s.store_mutex);
  if (base.get() != s.base) {
    // A new job store (init after shutdown): keys of its own.
    s.base = base.get();
    s.store = {};
    if (base) {
      s.store = c10::make_intrusive<c10d::PrefixStore>("ddp_positions", base);
    }
  }
  return s.store;
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

// A rank's record: "SEQ STATE WRAPPER STEP WHAT", STATE W (waiting in it),
// R (running since it), J (in ddp::join, after SEQ).
struct Record {
  bool present = false;
  char state = 'R';
  Position at;
};

std::string record_text(char state, const Position& at) {
  std::ostringstream out;
  out << at.seq << ' ' << state << ' ' << at.wrapper << ' ' << at.step << ' '
      << at.what;
  return out.str();
}

Record parse_record(const std::string& text) {
  Record record;
  std::istringstream in(text);
  in >> record.at.seq >> record.state >> record.at.wrapper >> record.at.step;
  std::getline(in >> std::ws, record.at.what);
  record.present = static_cast<bool>(in) || !record.at.what.empty();
  return record;
}

std::string key_of(int rank) { return "pos/" + std::to_string(rank); }

void publish(char state, const Position& at) {
  if (auto store = positions_store()) {
    std::lock_guard<std::mutex> lock(join_state().store_mutex);
    store->set(key_of(ddp::rank()), bytes_of(record_text(state, at)));
  }
}

Record read_record(c10d::Store& store, int rank) {
  std::lock_guard<std::mutex> lock(join_state().store_mutex);
  const std::string key = key_of(rank);
  if (!store.check({key})) {
    return {};
  }
  const auto bytes = store.get(key);
  return parse_record(std::string(bytes.begin(), bytes.end()));
}

std::map<int, Record> read_peers() {
  std::map<int, Record> peers;
  auto store = positions_store();
  if (!store) {
    return peers;
  }
  for (int r = 0; r < ddp::world_size(); ++r) {
    if (r != ddp::rank()) {
      peers[r] = read_record(*store, r);
    }
  }
  return peers;
}

bool same_collective(const Position& a, const Position& b) {
  return a.seq == b.seq && a.what == b.what && a.wrapper == b.wrapper &&
         a.step == b.step;
}

std::string describe_record(const Record& record) {
  if (!record.present) {
    return "has not waited in any collective long enough to say where it is";
  }
  switch (record.state) {
  case 'W':
    return "in " + describe_position(record.at);
  case 'J':
    return "in ddp::join (its training has ended)";
  default:
    return "computing, after " + describe_position(record.at);
  }
}

// One line: this rank's position and every peer's.
std::string positions_line(const std::string& mine,
                           const std::map<int, Record>& peers) {
  std::ostringstream out;
  out << "rank " << ddp::rank() << " (this rank) " << mine;
  for (const auto& [rank, record] : peers) {
    out << "; rank " << rank << ' ' << describe_record(record);
  }
  return out.str();
}

[[noreturn]] void end_with_positions(const std::string& message) {
  if (auto store = positions_store()) {
    try {
      std::lock_guard<std::mutex> lock(join_state().store_mutex);
      store->set("abort", bytes_of(std::to_string(ddp::rank())));
      // Time for the peers' next look (kAbortPoll) before this rank leaves:
      // rank 0's leaving takes the store, and a peer's sockets, with it.
      std::this_thread::sleep_for(2 * kAbortPoll);
    } catch (const std::exception&) {
      // The store may be gone with rank 0: the message still stands.
    }
  }
  record_failure(message, FailureKind::kCollective);
  throw PositionsError(message);
}

// A peer that ended the job for a desync leaves "abort": this rank ends too,
// naming where it is.
void check_abort(const std::string& mine) {
  auto store = positions_store();
  if (!store) {
    return;
  }
  std::string who;
  {
    std::lock_guard<std::mutex> lock(join_state().store_mutex);
    if (!store->check({"abort"})) {
      return;
    }
    const auto bytes = store->get("abort");
    who = std::string(bytes.begin(), bytes.end());
  }
  end_with_positions("ddp: rank " + who +
                     " found the ranks in different collectives and ended "
                     "the job: " +
                     positions_line(mine, read_peers()));
}

// The slow part of a wait: publish, look for aborts, compare positions.
class SlowWait {
public:
  explicit SlowWait(const Position& at)
      : at_(at), start_(Clock::now()), unwinding_(std::uncaught_exceptions()) {}
  ~SlowWait() {
    // Left by an error (a desync): the record stays where this rank waited.
    if (published_ && std::uncaught_exceptions() == unwinding_) {
      try {
        publish('R', at_);
      } catch (const std::exception&) {
        // Leaving a wait: nothing to report.
      }
    }
  }
  SlowWait(const SlowWait&) = delete;
  SlowWait& operator=(const SlowWait&) = delete;

  void tick() { tick(Clock::now() - start_); }
  const Position& position() const { return at_; }

  void tick(Clock::duration waited) {
    if (waited < kPublishAfter || store_gone_) {
      return;
    }
    try {
      look_around(waited);
    } catch (const PositionsError&) {
      throw;
    } catch (const std::exception&) {
      // Rank 0's store is gone (with rank 0): the collective itself fails
      // next, or the timeout ends it.
      store_gone_ = true;
    }
  }

private:
  void look_around(Clock::duration waited) {
    const auto now = Clock::now();
    if (!published_) {
      publish('W', at_);
      published_ = true;
    }
    const std::string mine = "in " + describe_position(at_);
    if (now - last_abort_poll_ >= kAbortPoll) {
      last_abort_poll_ = now;
      check_abort(mine);
    }
    const auto after = desync_after();
    if (after.count() == 0 || waited < after ||
        now - last_compare_ < kComparePeriod) {
      return;
    }
    last_compare_ = now;
    // Peers waiting in another collective, twice in a row (a record read
    // just before its rank left that wait is not a desync).
    const auto peers = read_peers();
    std::string apart;
    for (const auto& [rank, record] : peers) {
      if (record.present && record.state == 'W' &&
          !same_collective(record.at, at_)) {
        apart +=
            std::to_string(rank) + ':' + record_text('W', record.at) + '\n';
      }
    }
    if (apart.empty() || apart != last_apart_) {
      last_apart_ = apart;
      return;
    }
    end_with_positions(
        "ddp: the ranks wait in different collectives (a desync: a branch "
        "or a number of steps that differs by rank): " +
        positions_line(mine, peers));
  }

  Position at_;
  Clock::time_point start_;
  int unwinding_ = 0;
  bool published_ = false;
  bool store_gone_ = false;
  Clock::time_point last_abort_poll_{};
  Clock::time_point last_compare_{};
  std::string last_apart_;
};

thread_local SlowWait* blocking_wait = nullptr;

bool is_gloo() { return ddp::backend_name() == "gloo"; }

// Completion of a Gloo work, as a condition this thread can wait on in
// slices (Work::wait with a timeout throws when it expires).
struct Completion {
  std::mutex mutex;
  std::condition_variable done;
  bool completed = false;
};

// A collective that failed because a peer ended the job for a desync (it
// left, its sockets closed): the desync is the news, with this rank's
// position. Otherwise the caller rethrows the collective's own error.
void after_failure(const Position& at) {
  try {
    check_abort("in " + describe_position(at));
  } catch (const PositionsError&) {
    throw;
  } catch (const std::exception&) {
    // The store went with the peer: nothing more to say.
  }
}

// Runs `finish` (the wait that returns the collective's result or error).
template <typename Finish> void finish_wait(const Position& at, Finish finish) {
  try {
    finish();
  } catch (const PositionsError&) {
    throw;
  } catch (const std::exception&) {
    after_failure(at);
    throw;
  }
}

} // namespace

std::string describe_position(const Position& at) {
  std::ostringstream out;
  out << "the " << at.what;
  if (at.wrapper >= 0) {
    out << " of wrapper " << at.wrapper;
  }
  if (at.step >= 0) {
    if (at.what.rfind("end-of-training", 0) == 0) {
      out << " after " << at.step << " steps";
    } else {
      out << " at step " << at.step;
    }
  }
  out << " (collective #" << at.seq << ')';
  return out.str();
}

Position begin_collective(const char* what, int64_t wrapper, int64_t step) {
  Position at;
  at.seq = join_state().seq.fetch_add(1, std::memory_order_relaxed) + 1;
  at.what = what;
  at.wrapper = wrapper;
  at.step = step;
  return at;
}

void wait_collective(const c10::intrusive_ptr<c10d::Work>& work,
                     const Position& at) {
  if (work->isCompleted()) {
    finish_wait(at, [&] { work->wait(); }); // its error, if it failed
    return;
  }
  if (!is_gloo()) {
    // NCCL's wait only orders streams; the host waits for the events.
    finish_wait(at, [&] {
      work->wait();
      SlowWait slow(at);
      while (!work->isCompleted()) {
        slow.tick();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      work->wait();
    });
    return;
  }
  auto completion = std::make_shared<Completion>();
  work->getFuture()->addCallback([completion](c10::ivalue::Future&) {
    std::lock_guard<std::mutex> lock(completion->mutex);
    completion->completed = true;
    completion->done.notify_all();
  });
  {
    SlowWait slow(at);
    std::unique_lock<std::mutex> lock(completion->mutex);
    auto slice = kPublishAfter;
    while (!completion->done.wait_for(lock, slice,
                                      [&] { return completion->completed; })) {
      lock.unlock();
      slow.tick();
      lock.lock();
      slice = std::chrono::milliseconds(50);
    }
  }
  // Completed: returns, or rethrows the collective's error.
  finish_wait(at, [&] { work->wait(); });
}

void wait_collective(std::future<void>& done, const Position& at) {
  if (done.wait_for(kPublishAfter) != std::future_status::ready) {
    SlowWait slow(at);
    while (done.wait_for(std::chrono::milliseconds(50)) !=
           std::future_status::ready) {
      slow.tick();
    }
  }
  finish_wait(at, [&] { done.get(); });
}

BlockingCollective::BlockingCollective(const Position& at) {
  blocking_wait = new SlowWait(at);
}
BlockingCollective::~BlockingCollective() {
  delete blocking_wait;
  blocking_wait = nullptr;
}

void on_peer_failure() {
  if (blocking_wait != nullptr) {
    after_failure(blocking_wait->position());
  }
}

void on_slow_wait(std::chrono::steady_clock::duration waited) {
  if (blocking_wait != nullptr) {
    blocking_wait->tick(waited);
  }
}

namespace {

std::array<int64_t, kHeaderFields>
exchange_header(const std::array<int64_t, kHeaderFields>& mine,
                const char* what) {
  auto tensor = torch::tensor(std::vector<int64_t>(mine.begin(), mine.end()),
                              torch::kLong);
  if (ddp::backend_name() == "nccl") {
    tensor = tensor.to(ddp::device());
  }
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  const auto at = begin_collective(what);
  try {
    wait_collective(ddp::process_group()->allreduce(tensors, options), at);
  } catch (const PositionsError&) {
    throw;
  } catch (const std::exception& e) {
    collective_failed(("ddp: " + std::string(what)).c_str(), e);
  }
  const auto cpu = tensors[0].cpu();
  std::array<int64_t, kHeaderFields> all{};
  for (int64_t i = 0; i < kHeaderFields; ++i) {
    all[i] = cpu[i].item<int64_t>();
  }
  return all;
}

int64_t authority(int rank) {
  return join_state().own_backwards.load() * kRankSpan + (kRankSpan - 1 - rank);
}
int authority_rank(int64_t field) {
  return static_cast<int>(kRankSpan - 1 - field % kRankSpan);
}

std::array<int64_t, kHeaderFields>
stepping_header(int64_t kind, int64_t wrapper, int64_t step, int64_t code) {
  std::array<int64_t, kHeaderFields> h{};
  h[kStepping] = 1;
  h[kKind] = kind;
  h[kKindNeg] = -kind;
  h[kWrapper] = wrapper;
  h[kWrapperNeg] = -wrapper;
  h[kStep] = step;
  h[kStepNeg] = -step;
  h[kLowestStepperNeg] = -ddp::rank();
  h[kProgramCode] = code;
  h[kAuthority] = authority(ddp::rank());
  return h;
}

// The stepping ranks disagree: they are apart themselves.
void check_agreement(const std::array<int64_t, kHeaderFields>& h) {
  if (h[kKind] == -h[kKindNeg] && h[kWrapper] == -h[kWrapperNeg] &&
      h[kStep] == -h[kStepNeg]) {
    return;
  }
  std::ostringstream out;
  out << "ddp: the ranks still stepping after a rank joined are apart: "
         "between wrapper "
      << -h[kWrapperNeg] << " and " << h[kWrapper] << ", steps " << -h[kStepNeg]
      << " to " << h[kStep]
      << " (a branch or a number of steps that differs by rank)";
  end_with_positions(out.str());
}

std::string program_collective_error(const std::string& what) {
  return "ddp: " + what +
         " was called while a rank had already ended its training "
         "(ddp::join): a collective of the program's own inside a training "
         "loop whose number of steps differs by rank cannot be joined. Make "
         "the loop take the same number of steps on every rank, or move " +
         what + " out of it";
}

} // namespace

bool peers_joined() {
  return join_state().peers_joined.load(std::memory_order_relaxed);
}

int announce_backward(int64_t wrapper, int64_t step) {
  const auto h = exchange_header(stepping_header(kBackward, wrapper, step, 0),
                                 "join header");
  check_agreement(h);
  return static_cast<int>(-h[kLowestStepperNeg]);
}

void announce_program_collective(const char* what) {
  if (!peers_joined()) {
    return;
  }
  const auto h = exchange_header(
      stepping_header(kProgram, -1, -1, program_code(what)), "join header");
  (void)h;
  end_with_positions(program_collective_error(what) + ": " +
                     positions_line(std::string("in ") + what, read_peers()));
}

void saw_stepping_ranks(int stepping, int world_size) {
  if (stepping < world_size) {
    join_state().peers_joined.store(true, std::memory_order_relaxed);
  }
}

void count_own_backward() {
  join_state().own_backwards.fetch_add(1, std::memory_order_relaxed);
}

void set_join_participants(JoinParticipants participants) {
  auto& s = join_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.participants = std::move(participants);
}

namespace {

// After every rank joined: the final parameters everywhere, back to the
// fast path.
void finish_join(JoinState& s, int root) {
  if (s.participants.take_state_of) {
    s.participants.take_state_of(root);
  }
  s.peers_joined = false;
  ++s.epoch;
}

// Joined, while some rank steps: each header says what to take part in.
void follow_headers(JoinState& s) {
  std::array<int64_t, kHeaderFields> mine;
  mine.fill(kNone);
  mine[kStepping] = 0;
  mine[kProgramCode] = 0;
  for (;;) {
    mine[kAuthority] = authority(ddp::rank());
    const auto h = exchange_header(mine, "join header");
    if (h[kStepping] == 0) {
      finish_join(s, authority_rank(h[kAuthority]));
      return;
    }
    check_agreement(h);
    if (h[kKind] == kProgram) {
      const auto& names = program_collectives();
      const auto code = static_cast<size_t>(h[kProgramCode]);
      end_with_positions(program_collective_error(
                             code < names.size() ? names[code] : names[0]) +
                         ": " +
                         positions_line("in ddp::join (its training has ended)",
                                        read_peers()));
    }
    const int root = static_cast<int>(-h[kLowestStepperNeg]);
    if (!s.participants.shadow_backward ||
        !s.participants.shadow_backward(h[kWrapper], h[kStep], root)) {
      end_with_positions(
          "ddp: a rank still stepping synchronised wrapper " +
          std::to_string(h[kWrapper]) +
          ", which this rank no longer has (it was destroyed when this rank's "
          "training ended): keep the wrapper alive until ddp::join()");
    }
  }
}

// Joined on the fast path: wait until every rank has joined, or until a
// stepping peer waits in the collective that comes next for this rank,
// then take part in it.
void join_fast(JoinState& s) {
  auto store = positions_store();
  const int world = ddp::world_size();
  const std::string count_key = "join/" + std::to_string(s.epoch);
  {
    std::lock_guard<std::mutex> lock(s.store_mutex);
    if (store->add(count_key, 1) == world) {
      ++s.epoch;
      return;
    }
  }
  Position last;
  last.seq = s.seq.load();
  last.what = "ddp::join";
  publish('J', last);
  const auto deadline = Clock::now() + collective_timeout();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(s.store_mutex);
      if (store->add(count_key, 0) == world) {
        ++s.epoch;
        return;
      }
    }
    check_abort("in ddp::join (its training has ended)");
    for (const auto& [rank, record] : read_peers()) {
      if (!record.present || record.state != 'W' ||
          record.at.seq != last.seq + 1) {
        continue; // computing, or a record of a collective already done
      }
      const auto& what = record.at.what;
      if (what == "gradient all-reduce" && s.participants.shadow_backward &&
          s.participants.shadow_backward(record.at.wrapper, record.at.step,
                                         /*root=*/0)) {
        s.peers_joined = true; // the peers learn it from this pass
        follow_headers(s);
        return;
      }
      end_with_positions(
          "ddp: rank " + std::to_string(rank) + " went on to " +
          describe_position(record.at) +
          " after this rank's training ended (ddp::join); only synchronised "
          "backward passes of a live wrapper can be joined: " +
          positions_line("in ddp::join (its training has ended)",
                         read_peers()));
    }
    if (Clock::now() > deadline) {
      end_with_positions("ddp: rank " + std::to_string(ddp::rank()) +
                         " waited the timeout in ddp::join for its peers: " +
                         positions_line("in ddp::join (its training has ended)",
                                        read_peers()));
    }
    std::this_thread::sleep_for(kJoinPoll);
  }
}

} // namespace

} // namespace detail

void join() {
  if (!ddp::is_distributed() || ddp::world_size() <= 1 ||
      detail::a_collective_failed()) {
    return;
  }
  auto& s = detail::join_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.joined) {
    return; // a wrapper's destructor inside join's own final sync
  }
  s.joined = true;
  struct Unjoin {
    detail::JoinState& s;
    ~Unjoin() { s.joined = false; }
  } unjoin{s};
  if (s.peers_joined) {
    detail::follow_headers(s);
  } else {
    detail::join_fast(s);
  }
}

} // namespace ddp
