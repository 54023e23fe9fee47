// How the ddpruns of one job end it together: see node_link.h.

#include "node_link.h"

#include "../src/host_address.h"
#include "job_token.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

namespace ddprun {
namespace {

constexpr auto kPingInterval = std::chrono::seconds(1);
// How long a node that reported a failure waits for the coordinator's
// verdict before it explains the failure with what it saw itself.
constexpr auto kVerdictWait = std::chrono::seconds(4);
// 5 s for a cause to follow the first consequence: on a loaded 2-core
// machine a cause's report may come a little after the collective failures
// it causes.
constexpr auto kCauseWindow = std::chrono::seconds(5);
// Connections in their handshake at once (sshd's MaxStartups is 10): more
// are closed at once, so a flood cannot use up node 0's file descriptors;
// the job's nodes try again. Each has kHandshakeTimeout to join.
constexpr size_t kMaxPendingConnections = 32;
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// What node 0 prints about connections that are not the job's nodes: at
// most this many lines per window, then one line with the count.
constexpr int kNoticesPerWindow = 5;
constexpr auto kNoticeWindow = std::chrono::seconds(10);

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string seconds_text(Clock::duration d) {
  std::ostringstream out;
  out << seconds(d) << " s";
  return out.str();
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

std::string kind_word(Failure::Kind kind) {
  switch (kind) {
  case Failure::Kind::kConsequence:
    return "consequence";
  case Failure::Kind::kStopped:
    return "stopped";
  case Failure::Kind::kCause:
    break;
  }
  return "cause";
}

std::optional<Failure::Kind> kind_of(const std::string& word) {
  if (word == "cause") {
    return Failure::Kind::kCause;
  }
  if (word == "consequence") {
    return Failure::Kind::kConsequence;
  }
  if (word == "stopped") {
    return Failure::Kind::kStopped;
  }
  return std::nullopt;
}

/// The host name as `join` carries it (node_message.h's characters).
std::string message_host(std::string host) {
  if (host.size() > kMaxHostBytes) {
    host.resize(kMaxHostBytes);
  }
  for (char& c : host) {
    c = is_host_char(c) ? c : '_';
  }
  return host.empty() ? std::string("?") : host;
}

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char text[INET6_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    if (addr.ss_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr,
                  text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr,
                  text, sizeof(text));
    }
  }
  return text;
}

} // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return 0;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string signal_name(int sig) {
  switch (sig) {
  case SIGHUP:
    return "SIGHUP";
  case SIGINT:
    return "SIGINT";
  case SIGQUIT:
    return "SIGQUIT";
  case SIGILL:
    return "SIGILL";
  case SIGABRT:
    return "SIGABRT";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGKILL:
    return "SIGKILL";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGPIPE:
    return "SIGPIPE";
  case SIGTERM:
    return "SIGTERM";
  case SIGSTOP:
    return "SIGSTOP";
  case SIGTSTP:
    return "SIGTSTP";
  case SIGTTIN:
    return "SIGTTIN";
  case SIGTTOU:
    return "SIGTTOU";
  case SIGXCPU:
    return "SIGXCPU";
  default:
    return "signal " + std::to_string(sig);
  }
}

// --- RootCause
// ----------------------------------------------------------------

void RootCause::report(const Failure& failure, Clock::time_point now) {
  if (failure.kind == Failure::Kind::kConsequence && !first_consequence_) {
    first_consequence_ = now;
  }
  failures_.push_back(failure);
}

void RootCause::resumed(int rank) {
  for (auto it = failures_.begin(); it != failures_.end();) {
    if (it->kind == Failure::Kind::kStopped && it->rank == rank) {
      it = failures_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<Failure> RootCause::decide(Clock::time_point now,
                                         bool final) const {
  for (const auto& f : failures_) {
    if (f.kind == Failure::Kind::kCause) {
      return f;
    }
  }
  if (!first_consequence_) {
    return std::nullopt; // stopped workers alone do not end a job
  }
  for (const auto& f : failures_) {
    if (f.kind == Failure::Kind::kStopped) {
      Failure cause = f;
      cause.kind = Failure::Kind::kCause;
      return cause;
    }
  }
  if (!final && now < *first_consequence_ + window_) {
    return std::nullopt;
  }
  for (const auto& f : failures_) {
    if (f.kind == Failure::Kind::kConsequence) {
      return f;
    }
  }
  return std::nullopt;
}

// --- NodeLink
// -----------------------------------------------------------------

NodeLink::NodeLink(LinkConfig config)
    : config_(std::move(config)), root_(kCauseWindow) {}

NodeLink::~NodeLink() {
  for (auto& peer : peers_) {
    close_peer(peer);
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
  }
}

std::string NodeLink::master() const {
  return config_.master_addr + ":" + std::to_string(config_.master_port);
}

std::string NodeLink::describe_node(const Peer& peer) const {
  return "node " + std::to_string(peer.node) + "'s ddprun on " +
         (peer.host.empty() ? std::string("?") : peer.host) + " (" +
         peer.address + ")";
}

bool NodeLink::send_line(int fd, const std::string& line) {
  if (fd < 0) {
    return false;
  }
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false; // a full buffer means the peer stopped reading long ago
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool NodeLink::receive(Peer& peer) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(peer.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      peer.input.append(buffer, static_cast<size_t>(n));
      peer.heard = Clock::now();
      for (size_t at = 0; at <= peer.input.size();) {
        const size_t nl =
            std::min(peer.input.find('\n', at), peer.input.size());
        if (nl - at > kMaxLineBytes) {
          peer.oversize = true; // not a ddprun
          return false;
        }
        at = nl + 1;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    return false; // closed, or reset
  }
}

void NodeLink::close_peer(Peer& peer) {
  if (peer.fd >= 0) {
    ::close(peer.fd);
    peer.fd = -1;
  }
}

int NodeLink::join(const std::function<std::optional<Failure>()>& interrupted,
                   Failure& failure) {
  last_ping_ = Clock::now();
  return coordinator() ? join_as_coordinator(interrupted, failure)
                       : join_as_node(interrupted, failure);
}

std::string NodeLink::mismatch(int node, int nnodes, int nproc, int restarts,
                               const std::string& host) const {
  const std::string who = "node " + std::to_string(node) + " on " + host;
  if (nnodes != config_.nnodes) {
    return who + " was started with --nnodes " + std::to_string(nnodes) +
           ", node 0 with --nnodes " + std::to_string(config_.nnodes);
  }
  if (nproc != config_.nproc_per_node) {
    return who + " was started with --nproc-per-node " + std::to_string(nproc) +
           ", node 0 with " + std::to_string(config_.nproc_per_node);
  }
  if (restarts != config_.max_restarts) {
    return who + " was started with --max-restarts " +
           std::to_string(restarts) + ", node 0 with " +
           std::to_string(config_.max_restarts);
  }
  if (node < 1 || node >= config_.nnodes) {
    return "a ddprun on " + host + " joined as node " + std::to_string(node) +
           " of " + std::to_string(config_.nnodes);
  }
  return "";
}

bool NodeLink::listen_on_master(Failure& failure) {
  const std::string port = std::to_string(config_.master_port);
  // --master-addr names this host by a loopback address (other hosts reach
  // it by another): listening there would leave them out.
  const bool everywhere = ddp::detail::name_on_loopback(config_.master_addr);
  if (everywhere) {
    std::cerr << "ddprun: --master-addr " << config_.master_addr
              << " is a loopback address on " << config_.host
              << " (/etc/hosts?): node 0's ddprun listens on every interface, "
                 "as other hosts reach it by another address\n";
  }
  // Only --master-addr: the other interfaces of node 0 stay closed.
  const ddp::detail::ListeningSocket socket = ddp::detail::listen_on(
      everywhere ? "" : config_.master_addr, config_.master_port, 128);
  if (socket.resolve_error != 0) {
    failure = {Failure::Kind::kCause, 1, -1,
               "--master-addr " + config_.master_addr +
                   " cannot be resolved on " + config_.host + ": " +
                   ::gai_strerror(socket.resolve_error)};
    return false;
  }
  if (socket.fd < 0) {
    std::string hint;
    if (socket.error == EADDRINUSE) {
      hint = " (another job, or a program still holding it: choose another "
             "port)";
    } else if (socket.error == EADDRNOTAVAIL) {
      hint = " (--master-addr " + config_.master_addr +
             " is not an address of this host: node 0 runs where it points)";
    }
    failure = {Failure::Kind::kCause, 1, -1,
               "--master-port " + port + " cannot be used on " + config_.host +
                   ": " + std::strerror(socket.error) + hint};
    return false;
  }
  listen_fd_ = socket.fd;
  set_nonblocking(listen_fd_);
  return true;
}

void NodeLink::Notices::print(const std::string& line, Clock::time_point now) {
  flush(now);
  if (printed_ == 0) {
    window_start_ = now;
  }
  if (printed_ < kNoticesPerWindow) {
    ++printed_;
    std::cerr << "ddprun: " << line << "\n";
  } else {
    ++held_back_;
  }
}

void NodeLink::Notices::flush(Clock::time_point now, bool final) {
  if (printed_ == 0 || (!final && now - window_start_ < kNoticeWindow)) {
    return;
  }
  if (held_back_ > 0) {
    std::cerr << "ddprun: " << held_back_
              << " more connection(s) that were not the job's nodes were "
                 "closed in "
              << seconds_text(now - window_start_) << "\n";
  }
  printed_ = 0;
  held_back_ = 0;
}

void NodeLink::accept_connections(Clock::time_point now) {
  size_t pending = 0;
  for (const auto& peer : peers_) {
    pending += peer.node < 0 && peer.fd >= 0 ? 1 : 0;
  }
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      return;
    }
    if (pending >= kMaxPendingConnections) {
      // A flood: the job's nodes retry (they got no `hello`).
      notices_.print("closed a connection from " + peer_address(fd) + ": " +
                         std::to_string(kMaxPendingConnections) +
                         " connections are joining already",
                     now);
      ::close(fd);
      continue;
    }
    set_nonblocking(fd);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Peer peer;
    peer.fd = fd;
    peer.address = peer_address(fd);
    peer.heard = now;
    peer.accepted = now;
    if (config_.token) {
      peer.challenge = random_nonce();
    }
    if (config_.token && peer.challenge.empty()) {
      ::close(fd); // no randomness: no challenge
      continue;
    }
    send_line(fd, "hello " + (config_.token ? peer.challenge : "-"));
    peers_.push_back(std::move(peer));
    ++pending;
  }
}

std::string NodeLink::token_refusal(const NodeMessage& join, const Peer& peer,
                                    std::string& told) const {
  using Proof = NodeMessage::Proof;
  if (!config_.token) {
    if (join.proof_kind == Proof::kNone) {
      return "";
    }
    told = "node 0's ddprun on " + config_.host +
           " has no job token, this node has one (give every node the same "
           "--job-token-file or DDP_JOB_TOKEN, or none)";
    return "it has a job token, node 0 has none";
  }
  if (join.proof_kind != Proof::kGiven) {
    told = "node 0's ddprun on " + config_.host +
           " needs the job's token (--job-token-file or DDP_JOB_TOKEN), this "
           "node has none";
    return "it has no job token";
  }
  const std::string expected =
      join_proof(*config_.token, peer.challenge, join.nonce, join_fields(join));
  if (!proofs_equal(expected, join.proof)) {
    told = "its proof of the job token is wrong: this node holds another "
           "token than node 0's ddprun on " +
           config_.host;
    return "it holds another job token";
  }
  return "";
}

void NodeLink::drop(Peer& peer, const std::string& why, Clock::time_point now) {
  notices_.print("closed the connection from " + peer.address + ": " + why,
                 now);
  close_peer(peer);
}

NodeLink::Handshake NodeLink::handshake(Peer& peer, std::vector<bool>& joined,
                                        Clock::time_point now,
                                        Failure& failure) {
  const auto nl = peer.input.find('\n');
  if (nl == std::string::npos) {
    if (peer.oversize) {
      drop(peer,
           "it sent a line over " + std::to_string(kMaxLineBytes) + " bytes",
           now);
      return Handshake::kDropped;
    }
    if (now - peer.accepted > kHandshakeTimeout) {
      drop(peer, "it did not join within " + seconds_text(kHandshakeTimeout),
           now);
      return Handshake::kDropped;
    }
    return Handshake::kWaiting;
  }
  const auto join = parse_message(std::string_view(peer.input).substr(0, nl));
  peer.input.erase(0, nl + 1);
  if (!join || join->type != NodeMessage::Type::kJoin) {
    drop(peer, "it is not a ddprun (its first line is no `join`)", now);
    return Handshake::kDropped;
  }
  std::string told;
  const std::string refusal = token_refusal(*join, peer, told);
  if (!refusal.empty()) {
    notices_.print("refused a ddprun from " + peer.address + " (node " +
                       std::to_string(join->node) + " on " + join->host +
                       ", by its word): " + refusal,
                   now);
    send_line(peer.fd, "refused " + message_text(told));
    close_peer(peer);
    return Handshake::kDropped;
  }
  peer.host = join->host;
  send_line(peer.fd,
            config_.token
                ? "welcome " + welcome_proof(*config_.token, peer.challenge,
                                             join->nonce, join_fields(*join))
                : std::string("welcome"));
  // One of the job's ddpruns: a mismatch is the job's, as before tokens.
  std::string problem = mismatch(join->node, join->nnodes, join->nproc,
                                 join->max_restarts, join->host);
  if (problem.empty() && joined[static_cast<size_t>(join->node)]) {
    problem = "two ddpruns joined as node " + std::to_string(join->node) +
              " (the second on " + join->host + ")";
  }
  peer.node = join->node; // told of the problem as the job's nodes are
  if (!problem.empty()) {
    failure = {Failure::Kind::kCause, 2, -1, problem};
    return Handshake::kJobFails;
  }
  joined[static_cast<size_t>(join->node)] = true;
  return Handshake::kJoined;
}

int NodeLink::join_as_coordinator(
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  if (!listen_on_master(failure)) {
    return 0;
  }
  const auto deadline = Clock::now() + config_.join_timeout;
  auto abort_all = [&](const Failure& why) {
    for (auto& peer : peers_) {
      if (peer.node >= 0) { // nothing to connections that did not join
        send_line(peer.fd, "abort " + std::to_string(why.code) + " " +
                               message_text(why.text));
      }
      close_peer(peer);
    }
    peers_.clear();
    notices_.flush(Clock::now(), true);
  };
  std::vector<bool> joined(static_cast<size_t>(config_.nnodes), false);
  joined[0] = true;
  int waiting = config_.nnodes - 1;
  while (waiting > 0) {
    if (auto why = interrupted()) {
      failure = *why;
      abort_all(failure);
      return 0;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (int n = 1; n < config_.nnodes; ++n) {
        if (!joined[static_cast<size_t>(n)]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(n);
        }
      }
      failure = {Failure::Kind::kCause, 1, -1,
                 "node(s) " + missing + " of " +
                     std::to_string(config_.nnodes) + " never joined (" +
                     config_.host + " waited " +
                     seconds_text(config_.join_timeout) + " at port " +
                     std::to_string(config_.master_port) + ")"};
      abort_all(failure);
      return 0;
    }
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    for (auto& peer : peers_) {
      fds.push_back({peer.fd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    accept_connections(Clock::now());
    notices_.flush(Clock::now());
    for (auto it = peers_.begin(); it != peers_.end();) {
      Peer& peer = *it;
      const bool open = receive(peer);
      if (peer.node < 0) {
        const Handshake step = handshake(peer, joined, Clock::now(), failure);
        if (step == Handshake::kJobFails) {
          abort_all(failure);
          return 0;
        }
        if (step == Handshake::kJoined) {
          --waiting;
        } else if (!open && peer.fd >= 0) {
          close_peer(peer); // left without a word: nothing to say
        }
      } else if (!open) {
        failure = {Failure::Kind::kCause, 1, -1,
                   describe_node(peer) + " left before the job started"};
        abort_all(failure);
        return 0;
      }
      if (peer.fd < 0) {
        it = peers_.erase(it);
        continue;
      }
      ++it;
    }
  }
  // Connections still in their handshake are not the job's.
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (it->node < 0) {
      close_peer(*it);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  notices_.flush(Clock::now(), true);
  const int store_port = free_port();
  if (store_port == 0) {
    failure = {Failure::Kind::kCause, 1, -1,
               "no free port for the rendezvous store on " + config_.host};
    abort_all(failure);
    return 0;
  }
  for (auto& peer : peers_) {
    send_line(peer.fd, "start " + std::to_string(store_port));
    peer.heard = Clock::now();
  }
  return store_port;
}

int NodeLink::connect_to_coordinator(std::string& error) const {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(config_.master_addr.c_str(),
                                std::to_string(config_.master_port).c_str(),
                                &hints, &found);
  if (gai != 0 || found == nullptr) {
    error = std::string("cannot resolve ") + config_.master_addr + ": " +
            ::gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
      error = std::strerror(errno);
      continue;
    }
    set_nonblocking(s);
    int result = 0;
    if (::connect(s, a->ai_addr, a->ai_addrlen) != 0) {
      result = errno;
      if (result == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        result = ETIMEDOUT;
        if (::poll(&p, 1, 1000) > 0) {
          socklen_t len = sizeof(result);
          ::getsockopt(s, SOL_SOCKET, SO_ERROR, &result, &len);
        }
      }
    }
    if (result == 0) {
      fd = s;
    } else {
      ::close(s);
      error = std::strerror(result);
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

std::string NodeLink::join_answer(const NodeMessage& hello, Failure& failure) {
  NodeMessage join;
  join.node = config_.node_rank;
  join.nnodes = config_.nnodes;
  join.nproc = config_.nproc_per_node;
  join.host = message_host(config_.host);
  join.max_restarts = config_.max_restarts;
  join_fields_ = join_fields(join);
  if (!config_.token) {
    return join_fields_; // refused with a line if node 0 has a token
  }
  if (hello.nonce.empty()) {
    failure = {Failure::Kind::kCause, 2, -1,
               "node 0's ddprun at " + master() +
                   " has no job token, this node has one: refused (give "
                   "every node the same --job-token-file or DDP_JOB_TOKEN, "
                   "or none)"};
    return join_fields_ + " - -"; // node 0 says so too
  }
  join_nonce_ = random_nonce();
  if (join_nonce_.empty()) {
    failure = {Failure::Kind::kCause, 1, -1,
               "no random bytes for the job token's challenge on " +
                   config_.host};
    return "";
  }
  return join_fields_ + " " + join_nonce_ + " " +
         join_proof(*config_.token, hello.nonce, join_nonce_, join_fields_);
}

int NodeLink::join_as_node(
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  const auto start = Clock::now();
  const auto connect_deadline = start + config_.join_timeout;
  // The coordinator gives up at its own join timeout and says so: wait a
  // little longer for its word.
  const auto start_deadline = connect_deadline + std::chrono::seconds(5);
  std::string last_error = "no answer";
  for (;;) {
    if (auto why = interrupted()) {
      failure = *why;
      return 0;
    }
    if (Clock::now() >= connect_deadline) {
      failure = {Failure::Kind::kCause, 1, -1,
                 "could not reach node 0's ddprun at " + master() + " within " +
                     seconds_text(config_.join_timeout) + " (" + last_error +
                     ")"};
      return 0;
    }
    const int fd = connect_to_coordinator(last_error);
    if (fd >= 0) {
      peers_.clear();
      Peer coordinator;
      coordinator.fd = fd;
      coordinator.node = 0;
      coordinator.address = peer_address(fd);
      coordinator.heard = Clock::now();
      peers_.push_back(std::move(coordinator));
      const int port = await_start(start_deadline, start, interrupted, failure);
      if (port >= 0) {
        return port;
      }
      close_peer(peers_.back());
      peers_.clear();
      // Closed before `hello`: node 0 is busy with other connections.
      last_error = "node 0's ddprun closed the connection at once";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int NodeLink::await_start(
    Clock::time_point deadline, Clock::time_point start,
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  Peer& peer = peers_.back();
  std::string challenge;
  bool greeted = false;
  bool welcomed = false;
  auto fail = [&](int code, const std::string& text) {
    failure = {Failure::Kind::kCause, code, -1,
               "node 0's ddprun at " + master() + " " + text};
    return 0;
  };
  for (;;) {
    if (auto why = interrupted()) {
      failure = *why;
      return 0;
    }
    if (Clock::now() >= deadline) {
      return fail(1, "did not start the job within " +
                         seconds_text(deadline - start) +
                         " (is another program on that port?)");
    }
    pollfd p{peer.fd, POLLIN, 0};
    ::poll(&p, 1, 100);
    const bool open = receive(peer) && !peer.oversize;
    for (size_t nl; (nl = peer.input.find('\n')) != std::string::npos;) {
      const auto m = parse_message(std::string_view(peer.input).substr(0, nl));
      peer.input.erase(0, nl + 1);
      using Type = NodeMessage::Type;
      if (m && m->type == Type::kRefused) {
        return fail(2, "refused this node: " + m->text);
      }
      if (!greeted) {
        if (!m || m->type != Type::kHello) {
          return fail(1, "answered with what no ddprun says (is another "
                         "program on that port?)");
        }
        greeted = true;
        challenge = m->nonce;
        const std::string answer = join_answer(*m, failure);
        if (!answer.empty()) {
          send_line(peer.fd, answer);
        }
        if (answer.empty() || !failure.text.empty()) {
          return 0;
        }
      } else if (!welcomed) {
        if (m && m->type == Type::kWelcome) {
          if (config_.token &&
              !proofs_equal(welcome_proof(*config_.token, challenge,
                                          join_nonce_, join_fields_),
                            m->proof)) {
            return fail(2, "did not prove it holds the job token (another "
                           "job's, or not a ddprun): refused it");
          }
          welcomed = true;
        }
      } else if (m && m->type == Type::kStart) {
        peer.heard = Clock::now();
        return m->port;
      } else if (m && m->type == Type::kAbort) {
        failure = {Failure::Kind::kCause, m->code, -1, m->text};
        return 0;
      }
    }
    if (!open) {
      if (!greeted && !peer.oversize) {
        return -1; // try again
      }
      return fail(1, peer.oversize
                         ? "sent a line over " + std::to_string(kMaxLineBytes) +
                               " bytes"
                         : "closed the connection before the job started");
    }
  }
}

void NodeLink::service(Clock::time_point now) {
  if (coordinator() && listen_fd_ >= 0) {
    // A ddpruns that comes after the start is told, not left waiting.
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        break;
      }
      send_line(fd, "refused the job at port " +
                        std::to_string(config_.master_port) +
                        " started without this node (it joined late, or a "
                        "second job uses the port)");
      ::close(fd);
    }
  }
  const bool ping = now - last_ping_ >= kPingInterval;
  if (ping) {
    last_ping_ = now;
  }
  for (auto& peer : peers_) {
    if (peer.fd < 0) {
      continue;
    }
    if (ping) {
      send_line(peer.fd, "ping");
    }
    const bool open = receive(peer);
    for (size_t nl; (nl = peer.input.find('\n')) != std::string::npos;) {
      const std::string line = peer.input.substr(0, nl);
      peer.input.erase(0, nl + 1);
      on_line(peer, line, now);
    }
    if (!open) {
      close_peer(peer);
      // A node that failed may leave, unless the job is to restart.
      if (peer.oversize) {
        lost(peer,
             "sent a line over " + std::to_string(kMaxLineBytes) +
                 " bytes (not a ddprun of this version)",
             now);
      } else if (!peer.done && (!peer.failed || restart_ || waiting_)) {
        lost(peer, "closed its connection (killed, or its host is gone)", now);
      }
    } else if (!peer.done && now - peer.heard > config_.heartbeat_timeout) {
      close_peer(peer);
      lost(peer,
           "stopped answering: nothing for " +
               seconds_text(config_.heartbeat_timeout) +
               " (its host is down, or the link is cut)",
           now);
    }
  }
  if (coordinator()) {
    decide(now);
  } else if (!verdict_ && own_failure_ &&
             now - own_failure_at_ > kVerdictWait) {
    verdict_ = own_failure_; // no word from the coordinator: what we saw
  }
}

void NodeLink::on_line(Peer& peer, const std::string& line,
                       Clock::time_point now) {
  using Type = NodeMessage::Type;
  const auto m = parse_message(line);
  if (!m || m->type == Type::kPing) {
    return; // a later version's message, or a ping
  }
  if (coordinator()) {
    if (m->type == Type::kDone && !waiting_) {
      peer.done = true;
      finish_if_all_done();
    } else if (m->type == Type::kEnded) {
      peer.ended = true;
    } else if (m->type == Type::kFail) {
      Failure failure{*kind_of(m->failure_kind), m->code, m->rank, m->text};
      // Between attempts a worker's failure is the last attempt's, late.
      if (!(waiting_ && restartable(failure))) {
        if (failure.kind != Failure::Kind::kStopped) {
          peer.failed = true;
        }
        if (restart_ && !restartable(failure)) {
          cancel_restart(failure); // a node's ddprun signalled meanwhile
        } else {
          root_.report(failure, now);
        }
      }
    } else if (m->type == Type::kResumed) {
      root_.resumed(m->rank);
    }
  } else if ((m->type == Type::kAbort || m->type == Type::kRestart) &&
             (!verdict_ || restart_)) { // an abort cancels a restart
    verdict_ = Failure{Failure::Kind::kCause, m->code, -1, m->text};
    restart_ = m->type == Type::kRestart;
  } else if (m->type == Type::kFinished) {
    finished_ = true;
    peer.done = true; // its leaving is expected
  } else if (m->type == Type::kStart && waiting_) {
    start_port_ = m->port;
  }
}

void NodeLink::lost(Peer& peer, const std::string& why, Clock::time_point now) {
  if (coordinator()) {
    const Failure failure{Failure::Kind::kCause, 1, -1,
                          describe_node(peer) + " " + why};
    if (restart_) {
      cancel_restart(failure); // no restart without every node
      return;
    }
    root_.report(failure, now);
    decide(now);
  } else if (!verdict_ || restart_) {
    verdict_ =
        own_failure_ && !restart_
            ? *own_failure_
            : Failure{Failure::Kind::kCause, 1, -1,
                      "lost node 0's ddprun at " + master() + ": it " + why};
    restart_ = false;
  }
}

void NodeLink::cancel_restart(const Failure& failure) {
  verdict_ = failure;
  restart_ = false;
  for (auto& peer : peers_) {
    send_line(peer.fd, "abort " + std::to_string(failure.code) + " " +
                           message_text(failure.text));
  }
}

void NodeLink::decide(Clock::time_point now) {
  if (verdict_) {
    return;
  }
  verdict_ = root_.decide(now);
  if (verdict_) {
    restart_ =
        !waiting_ && restartable(*verdict_) && attempt_ < config_.max_restarts;
    for (auto& peer : peers_) {
      send_line(peer.fd, (restart_ ? "restart " : "abort ") +
                             std::to_string(verdict_->code) + " " +
                             message_text(verdict_->text));
    }
  }
}

void NodeLink::report(const Failure& failure, Clock::time_point now) {
  if (coordinator()) {
    root_.report(failure, now);
    decide(now);
    return;
  }
  if (failure.kind != Failure::Kind::kStopped && !own_failure_) {
    own_failure_ = failure;
    own_failure_at_ = now;
  }
  if (!peers_.empty() &&
      !send_line(peers_.front().fd, "fail " + kind_word(failure.kind) + " " +
                                        std::to_string(failure.code) + " " +
                                        std::to_string(failure.rank) + " " +
                                        message_text(failure.text)) &&
      failure.kind != Failure::Kind::kStopped && !verdict_) {
    verdict_ = failure; // the coordinator is gone: what we saw
  }
}

void NodeLink::resumed(int rank) {
  if (coordinator()) {
    root_.resumed(rank);
  } else if (!peers_.empty()) {
    send_line(peers_.front().fd, "resumed " + std::to_string(rank));
  }
}

void NodeLink::report_done() {
  done_ = true;
  if (!coordinator() && !peers_.empty()) {
    send_line(peers_.front().fd, "done");
  }
  finish_if_all_done();
}

void NodeLink::finish_if_all_done() {
  if (!coordinator() || config_.max_restarts == 0 || verdict_ || !done_) {
    return;
  }
  for (const auto& peer : peers_) {
    if (!peer.done) {
      return;
    }
  }
  for (auto& peer : peers_) {
    send_line(peer.fd, "finished");
  }
}

bool NodeLink::settled() const {
  if (verdict_) {
    return true;
  }
  if (!coordinator()) {
    // With restarts, a failure elsewhere may still restart this node.
    return done_ && (config_.max_restarts == 0 || finished_);
  }
  if (!done_) {
    return false;
  }
  for (const auto& peer : peers_) {
    if (!peer.done) {
      return false;
    }
  }
  return true;
}

// --- Restarts
// -----------------------------------------------------------------

void NodeLink::wait_input(int ms) {
  std::vector<pollfd> fds;
  for (const auto& peer : peers_) {
    if (peer.fd >= 0) {
      fds.push_back({peer.fd, POLLIN, 0});
    }
  }
  ::poll(fds.data(), fds.size(), ms);
}

int NodeLink::restart(
    const std::optional<Failure>& own,
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  if (verdict_ && !restart_) {
    failure = *verdict_; // the restart was cancelled: a signal, a node lost
    return 0;
  }
  // Nothing of the failed attempt decides the next one.
  const auto now = Clock::now();
  waiting_ = true;
  verdict_.reset();
  restart_ = false;
  own_failure_.reset();
  done_ = false;
  finished_ = false;
  start_port_ = 0;
  root_ = RootCause(kCauseWindow);
  for (auto& peer : peers_) {
    peer.done = false;
    peer.failed = false;
  }
  if (own && !coordinator()) {
    report(*own, now);
    waiting_ = false;
    failure = *own;
    return 0;
  }
  if (own) {
    report(*own, now); // the verdict: `abort` to every node
  }
  if (coordinator()) {
    return restart_as_coordinator(interrupted, failure);
  }
  send_line(peers_.front().fd, "ended");
  // The coordinator waits for every node's workers (a grace period each).
  const auto deadline = now + config_.join_timeout + std::chrono::seconds(5);
  for (;;) {
    service(Clock::now());
    if (verdict_) {
      failure = *verdict_;
      break;
    }
    if (start_port_ > 0) {
      ++attempt_;
      waiting_ = false;
      return start_port_;
    }
    if (auto why = interrupted()) {
      report(*why, Clock::now());
      failure = *why;
      break;
    }
    if (Clock::now() >= deadline) {
      failure = {Failure::Kind::kCause, 1, -1,
                 "node 0's ddprun at " + master() +
                     " did not restart the job within " +
                     seconds_text(deadline - now)};
      break;
    }
    wait_input(100);
  }
  waiting_ = false;
  return 0;
}

int NodeLink::restart_as_coordinator(
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  const auto deadline = Clock::now() + config_.join_timeout;
  for (;;) {
    const auto now = Clock::now();
    service(now);
    if (!verdict_) {
      if (auto why = interrupted()) {
        report(*why, now);
      }
    }
    std::string missing;
    for (auto& peer : peers_) {
      if (peer.fd < 0 && !verdict_) {
        // It left before the restart (it decided on its own, or was ended).
        root_.report({Failure::Kind::kCause, 1, -1,
                      describe_node(peer) + " left before the restart"},
                     now);
        decide(now);
      }
      if (!peer.ended) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(peer.node);
      }
    }
    if (!verdict_ && missing.empty()) {
      break;
    }
    if (!verdict_ && now >= deadline) {
      root_.report({Failure::Kind::kCause, 1, -1,
                    "node(s) " + missing +
                        " did not end their workers for the restart within " +
                        seconds_text(config_.join_timeout)},
                   now);
      decide(now);
    }
    if (verdict_) {
      failure = *verdict_;
      waiting_ = false;
      return 0;
    }
    wait_input(100);
  }
  const int store_port = free_port();
  if (store_port == 0) {
    root_.report({Failure::Kind::kCause, 1, -1,
                  "no free port for the rendezvous store on " + config_.host},
                 Clock::now());
    decide(Clock::now());
    failure = *verdict_;
    waiting_ = false;
    return 0;
  }
  for (auto& peer : peers_) {
    send_line(peer.fd, "start " + std::to_string(store_port));
    peer.heard = Clock::now();
    peer.ended = false;
  }
  ++attempt_;
  waiting_ = false;
  return store_port;
}

} // namespace ddprun
