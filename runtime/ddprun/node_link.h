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
// ddprun (the coordinator) on --master-port, carrying text lines
// (node_message.h parses them; kMaxLineBytes at most):
//   coordinator -> node   hello <challenge | ->      on accept
//   node -> coordinator   join <node> <nnodes> <nproc> <host> <max restarts>
//                              [<nonce> <proof> | - -]
//   coordinator -> node   welcome [<proof>]           it is one of the nodes
//   coordinator -> node   refused <text>              it is not: closed
//   coordinator -> node   start <store port>          every node joined
//   node -> coordinator   fail <kind> <code> <rank> <text>   a local failure
//   node -> coordinator   done                        its workers exited 0
//   coordinator -> node   abort <code> <text>         the job's root cause
//   coordinator -> node   restart <code> <text>       the same, restarting
//   node -> coordinator   ended                       its workers are gone
//   coordinator -> node   finished                    every node is done
//   both ways             ping                        every second
// The job token (--job-token-file, DDP_JOB_TOKEN; job_token.h): with one,
// `hello` carries 32 random bytes (hex), the node answers with a nonce of
// its own and HMAC-SHA256(token, context, challenge, nonce, join fields),
// and the coordinator, once that proof holds, proves the token back in
// `welcome` (another context, over the node's nonce): each side learns the
// other holds the token, neither sends it, and a proof cannot be replayed to
// another connection. A node without a token (five fields) meeting one with,
// a wrong proof, or a token held by the node alone (`- -` after `hello -`)
// is refused: one line on each side; the coordinator goes on waiting for
// the job's nodes. Nothing but `hello`, `welcome`, `refused` goes to a
// connection before it proved the token: a `fail`, `abort` or the store's
// port only to the job's nodes, and a node believes none before `welcome`.
// Limits (point 5): kMaxPendingConnections connections may be in their
// handshake at once (more are closed at once), each for kHandshakeTimeout;
// a longer line than kMaxLineBytes closes the connection; what node 0
// prints about such connections is rate-limited (a flood prints a
// summary). The coordinator listens on --master-addr only.
//
// A side that hears nothing for the heartbeat timeout, or whose connection
// closes before the job ended, has lost the other: a cause. Rank 0's
// rendezvous store runs on a port the coordinator chooses and hands out with
// `start`, so --master-port is the coordinators' own and a port held by
// another program is found before any worker starts.
//
// With --max-restarts N, a root cause that is a worker's failure (restartable)
// is sent as `restart` while attempts are left: every node ends its workers,
// says `ended`, and the coordinator, once every node has, hands out a new
// store port with `start` (a fresh store: rank 0 of the next attempt starts
// it empty, so no key of the failed attempt can be read). A node whose
// workers are done waits for `finished` (every node done) or `restart`.

#include "node_message.h"

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

/// Whether --max-restarts may restart the job after this root cause: a
/// worker's failure. A ddprun sent a signal, a node lost or never joined, a
/// job started wrongly end it.
inline bool restartable(const Failure& failure) { return failure.rank >= 0; }

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
  int max_restarts = 0; ///< every node must be given the same
  /// The job token: every node's or none (job_token.h).
  std::optional<std::string> token;
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
  /// Whether the verdict restarts the job (every node ends its workers and
  /// calls restart()).
  bool restarting() const { return verdict_ && restart_; }
  /// Whether this attempt is over on this node: a node once it reported
  /// done (with --max-restarts, once every node is done) or knows the
  /// verdict; the coordinator once the verdict went out or every node is
  /// done.
  bool settled() const;
  /// After a restarting verdict, once this node's workers are gone: blocks
  /// until every node's are and returns the next attempt's store port, or
  /// sets `failure` to why the job ends instead (returns 0): `own` (a signal
  /// this ddprun got since), a signal during the wait, a node lost.
  int restart(const std::optional<Failure>& own,
              const std::function<std::optional<Failure>()>& interrupted,
              Failure& failure);

private:
  struct Peer {
    int fd = -1;
    int node = -1;         ///< -1 until it joined
    std::string challenge; ///< coordinator: sent in `hello` ("" for none)
    Clock::time_point accepted;
    std::string host;
    std::string address;
    std::string input;
    Clock::time_point heard;
    bool done = false;
    bool failed = false;   ///< it reported a failure: its leaving is expected
    bool ended = false;    ///< its workers of a restarting attempt are gone
    bool oversize = false; ///< it sent a line over kMaxLineBytes
  };

  /// What node 0 prints about connections that are not the job's nodes: a
  /// few lines per kNoticeWindow, then one line counting the rest.
  class Notices {
  public:
    void print(const std::string& line, Clock::time_point now);
    /// Prints the count of the lines held back once their window is over
    /// (or now, with `final`).
    void flush(Clock::time_point now, bool final = false);

  private:
    Clock::time_point window_start_;
    int printed_ = 0;
    int held_back_ = 0;
  };
  enum class Handshake { kWaiting, kJoined, kDropped, kJobFails };

  bool send_line(int fd, const std::string& line);
  /// Reads what `peer` sent; false once its connection closed.
  bool receive(Peer& peer);
  void on_line(Peer& peer, const std::string& line, Clock::time_point now);
  void lost(Peer& peer, const std::string& why, Clock::time_point now);
  void decide(Clock::time_point now);
  /// Coordinator: a restarting verdict becomes `failure` (an abort).
  void cancel_restart(const Failure& failure);
  void close_peer(Peer& peer);
  /// Coordinator: tells every node once all are done (--max-restarts).
  void finish_if_all_done();
  /// The coordinator's side of restart(): every node ended, then `start`.
  int restart_as_coordinator(
      const std::function<std::optional<Failure>()>& interrupted,
      Failure& failure);
  /// Waits up to `ms` for input from a peer.
  void wait_input(int ms);
  /// Coordinator: listens on --master-addr:--master-port.
  bool listen_on_master(Failure& failure);
  /// Coordinator: accepts what came (each gets `hello`); past
  /// kMaxPendingConnections handshakes, closes new connections at once.
  void accept_connections(Clock::time_point now);
  /// Coordinator: a connection that has not joined yet, after input.
  Handshake handshake(Peer& peer, std::vector<bool>& joined,
                      Clock::time_point now, Failure& failure);
  /// Coordinator: why a `join` does not prove the job's token ("" if it
  /// does), as node 0 says it and as the refused node is told.
  std::string token_refusal(const NodeMessage& join, const Peer& peer,
                            std::string& told) const;
  void drop(Peer& peer, const std::string& why, Clock::time_point now);
  int join_as_coordinator(
      const std::function<std::optional<Failure>()>& interrupted,
      Failure& failure);
  /// Node: the handshake on a new connection, then the wait for `start`:
  /// the store's port, 0 with `failure`, -1 when node 0 closed the
  /// connection before `hello` (too many connections: try again).
  int await_start(Clock::time_point deadline, Clock::time_point start,
                  const std::function<std::optional<Failure>()>& interrupted,
                  Failure& failure);
  int join_as_node(const std::function<std::optional<Failure>()>& interrupted,
                   Failure& failure);
  std::string master() const;
  /// Why a node that joined with these options cannot be part of the job
  /// ("" when it can).
  std::string mismatch(int node, int nnodes, int nproc, int restarts,
                       const std::string& host) const;
  std::string describe_node(const Peer& peer) const;
  /// Node: connects to the coordinator (-1 until it can, setting `error`).
  int connect_to_coordinator(std::string& error) const;
  /// Node: this node's `join` in answer to `hello` (sets the nonce whose
  /// proof `welcome` must carry); "" and `failure` when it cannot join.
  std::string join_answer(const NodeMessage& hello, Failure& failure);

  LinkConfig config_;
  int listen_fd_ = -1;
  std::vector<Peer> peers_; ///< coordinator: the nodes; node: the coordinator
  RootCause root_;
  Notices notices_;
  std::string join_nonce_;  ///< node: the nonce of its `join`
  std::string join_fields_; ///< node: its `join` without the proof
  std::optional<Failure> verdict_;
  std::optional<Failure> own_failure_; ///< node: reported, verdict awaited
  Clock::time_point own_failure_at_;
  Clock::time_point last_ping_;
  bool done_ = false;
  bool restart_ = false;  ///< the verdict restarts the job
  bool finished_ = false; ///< node: the coordinator said every node is done
  bool waiting_ = false;  ///< between attempts (in restart())
  int start_port_ = 0;    ///< node: the next attempt's store port
  int attempt_ = 0;       ///< restarts so far
};

/// A TCP port nobody listens on right now, 0 when none could be found (the
/// usual race with other programs applies until it is bound).
int free_port();

/// The signal's name ("SIGKILL"), or its number.
std::string signal_name(int sig);

} // namespace ddprun
