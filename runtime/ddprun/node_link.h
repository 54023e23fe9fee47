#pragma once

// How the ddpruns of one job end it together, and with one explanation.
//
// Every failure a ddprun sees is a Failure: a cause (a worker killed or
// exiting with an error of its own, ddprun itself signalled, a node lost), a
// consequence (a worker whose collective broke because of a cause elsewhere:
// the runtime says so in TORCHELASTIC_ERROR_FILE) or a stopped worker (which
// breaks the collectives of the others only at their timeout). RootCause
// picks the one a user needs to read.
//
// With several nodes, each node's ddprun holds one TCP connection to node 0's
// ddprun (the coordinator) on --master-port, carrying text lines:
//   node -> coordinator   join <node> <nnodes> <nproc> <host>
//   coordinator -> node   start <store port>          every node joined
//   node -> coordinator   fail <kind> <code> <rank> <text>   a local failure
//   node -> coordinator   done                        its workers exited 0
//   coordinator -> node   abort <code> <text>         the job's root cause
//   both ways             ping                        every second
// A side that hears nothing for the heartbeat timeout, or whose connection
// closes before the job ended, has lost the other: a cause. Rank 0's
// rendezvous store runs on a port the coordinator chooses and hands out with
// `start`, so --master-port is the coordinators' own and a port held by
// another program is found before any worker starts.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ddprun {

using Clock = std::chrono::steady_clock;

struct Failure {
  enum class Kind { kCause, kConsequence, kStopped };
  Kind kind = Kind::kCause;
  int code = 1;     ///< what ddprun exits with when this is the root cause
  int rank = -1;    ///< the worker's global rank, -1 for none
  std::string text; ///< one line, e.g. "worker rank 1 on host0 (pid 12) ..."
};

/// The root cause among the failures reported, in the order they came: the
/// first cause; when only consequences came, a stopped worker (it is why the
/// others' collectives timed out), else the first consequence once `window`
/// passed without a cause (a cause elsewhere may still be on its way).
class RootCause {
public:
  explicit RootCause(Clock::duration window) : window_(window) {}
  void report(const Failure& failure, Clock::time_point now);
  /// A stopped worker continued: no longer a suspect.
  void resumed(int rank);
  /// `final`: no further report can come (decide without the window).
  std::optional<Failure> decide(Clock::time_point now,
                                bool final = false) const;

private:
  Clock::duration window_;
  std::vector<Failure> failures_;
  std::optional<Clock::time_point> first_consequence_;
};

struct LinkConfig {
  int nnodes = 2;
  int node_rank = 0;
  int nproc_per_node = 1;
  std::string master_addr;
  int master_port = 0;
  std::string host; ///< this machine's host name, for the messages
  Clock::duration join_timeout = std::chrono::seconds(600);
  Clock::duration heartbeat_timeout = std::chrono::seconds(30);
};

/// One node's side of the connection between the ddpruns of a job.
class NodeLink {
public:
  explicit NodeLink(LinkConfig config);
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  bool coordinator() const { return config_.node_rank == 0; }

  /// Blocks until every node joined: returns the rendezvous store's port
  /// (the workers' MASTER_PORT), or sets `failure` to why the job cannot
  /// start (returns 0). `interrupted` is asked every 100 ms (a signal sent
  /// to ddprun ends the wait with its Failure).
  int join(const std::function<std::optional<Failure>()>& interrupted,
           Failure& failure);

  /// Never blocks: sends heartbeats, reads what came, notices a lost peer.
  void service(Clock::time_point now);
  /// A failure on this node (the coordinator decides the root cause).
  void report(const Failure& failure, Clock::time_point now);
  void resumed(int rank);
  /// This node's workers all exited 0.
  void report_done();
  /// The job's root cause once known on this node.
  std::optional<Failure> verdict() const { return verdict_; }
  /// Whether this ddprun may exit: a node once it reported done or knows
  /// the verdict; the coordinator once the verdict went out or every node
  /// is done.
  bool settled() const;

private:
  struct Peer {
    int fd = -1;
    int node = -1; ///< -1 until it joined
    std::string host;
    std::string address;
    std::string input;
    Clock::time_point heard;
    bool done = false;
    bool failed = false; ///< it reported a failure: its leaving is expected
  };

  bool send_line(int fd, const std::string& line);
  /// Reads what `peer` sent; false once its connection closed.
  bool receive(Peer& peer);
  void on_line(Peer& peer, const std::string& line, Clock::time_point now);
  void lost(Peer& peer, const std::string& why, Clock::time_point now);
  void decide(Clock::time_point now);
  void close_peer(Peer& peer);
  int join_as_coordinator(
      const std::function<std::optional<Failure>()>& interrupted,
      Failure& failure);
  int join_as_node(const std::function<std::optional<Failure>()>& interrupted,
                   Failure& failure);
  std::string master() const;
  std::string describe_node(const Peer& peer) const;

  LinkConfig config_;
  int listen_fd_ = -1;
  std::vector<Peer> peers_; ///< coordinator: the nodes; node: the coordinator
  RootCause root_;
  std::optional<Failure> verdict_;
  std::optional<Failure> own_failure_; ///< node: reported, verdict awaited
  Clock::time_point own_failure_at_;
  Clock::time_point last_ping_;
  bool done_ = false;
};

/// A TCP port nobody listens on right now, 0 when none could be found (the
/// usual race with other programs applies until it is bound).
int free_port();

/// The signal's name ("SIGKILL"), or its number.
std::string signal_name(int sig);

} // namespace ddprun
