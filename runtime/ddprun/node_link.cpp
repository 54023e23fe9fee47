// How the ddpruns of one job end it together: see node_link.h.

#include "node_link.h"

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

/// One line, whatever the text held.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

std::string peer_address(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
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
      if (peer.input.size() > (1u << 20)) {
        return false; // not a ddprun
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

int NodeLink::join_as_coordinator(
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    failure = {Failure::Kind::kCause, 1, -1,
               std::string("cannot open a socket: ") + std::strerror(errno)};
    return 0;
  }
  const int yes = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(config_.master_port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 ||
      ::listen(listen_fd_, 64) != 0) {
    const int error = errno;
    failure = {Failure::Kind::kCause, 1, -1,
               "--master-port " + std::to_string(config_.master_port) +
                   " cannot be used on " + config_.host + ": " +
                   std::strerror(error) +
                   (error == EADDRINUSE
                        ? " (another job, or a program still holding it: "
                          "choose another port)"
                        : "")};
    return 0;
  }
  set_nonblocking(listen_fd_);

  const auto deadline = Clock::now() + config_.join_timeout;
  auto abort_all = [&](const Failure& why) {
    for (auto& peer : peers_) {
      send_line(peer.fd, "abort " + std::to_string(why.code) + " " + why.text);
      close_peer(peer);
    }
    peers_.clear();
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
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        break;
      }
      set_nonblocking(fd);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Peer peer;
      peer.fd = fd;
      peer.address = peer_address(fd);
      peer.heard = Clock::now();
      peers_.push_back(std::move(peer));
    }
    for (auto it = peers_.begin(); it != peers_.end();) {
      Peer& peer = *it;
      const bool open = receive(peer);
      const auto nl = peer.input.find('\n');
      if (peer.node < 0 && nl != std::string::npos) {
        std::istringstream line(peer.input.substr(0, nl));
        peer.input.erase(0, nl + 1);
        std::string word;
        int node = -1, nnodes = -1, nproc = -1, restarts = -1;
        line >> word >> node >> nnodes >> nproc >> peer.host >> restarts;
        std::string problem;
        if (word != "join" || !line) {
          close_peer(peer); // not a ddprun: drop it
        } else {
          problem = mismatch(node, nnodes, nproc, restarts, peer.host);
          if (problem.empty() && joined[static_cast<size_t>(node)]) {
            problem = "two ddpruns joined as node " + std::to_string(node) +
                      " (the second on " + peer.host + ")";
          }
          if (problem.empty()) {
            peer.node = node;
            joined[static_cast<size_t>(node)] = true;
            --waiting;
          }
        }
        if (!problem.empty()) {
          // A job started wrongly: end it everywhere, saying why.
          failure = {Failure::Kind::kCause, 2, -1, problem};
          abort_all(failure);
          return 0;
        }
      }
      if (peer.fd < 0 || (!open && peer.node < 0)) {
        close_peer(peer);
        it = peers_.erase(it);
        continue;
      }
      if (!open) {
        failure = {Failure::Kind::kCause, 1, -1,
                   describe_node(peer) + " left before the job started"};
        abort_all(failure);
        return 0;
      }
      ++it;
    }
  }
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

int NodeLink::join_as_node(
    const std::function<std::optional<Failure>()>& interrupted,
    Failure& failure) {
  const auto start = Clock::now();
  const auto connect_deadline = start + config_.join_timeout;
  // The coordinator gives up at its own join timeout and says so: wait a
  // little longer for its word.
  const auto start_deadline = connect_deadline + std::chrono::seconds(5);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no answer";
  int fd = -1;
  while (fd < 0) {
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
    addrinfo* found = nullptr;
    const int gai = ::getaddrinfo(config_.master_addr.c_str(),
                                  std::to_string(config_.master_port).c_str(),
                                  &hints, &found);
    if (gai != 0 || found == nullptr) {
      last_error = std::string("cannot resolve ") + config_.master_addr + ": " +
                   ::gai_strerror(gai);
    } else {
      const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      set_nonblocking(s);
      int error = 0;
      if (::connect(s, found->ai_addr, found->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          pollfd p{s, POLLOUT, 0};
          error = ETIMEDOUT;
          if (::poll(&p, 1, 1000) > 0) {
            socklen_t len = sizeof(error);
            ::getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len);
          }
        }
      }
      if (error == 0) {
        fd = s;
      } else {
        ::close(s);
        last_error = std::strerror(error);
      }
    }
    if (found != nullptr) {
      ::freeaddrinfo(found);
    }
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Peer coordinator;
  coordinator.fd = fd;
  coordinator.node = 0;
  coordinator.address = peer_address(fd);
  coordinator.heard = Clock::now();
  peers_.push_back(std::move(coordinator));
  Peer& peer = peers_.back();
  send_line(fd, "join " + std::to_string(config_.node_rank) + " " +
                    std::to_string(config_.nnodes) + " " +
                    std::to_string(config_.nproc_per_node) + " " +
                    config_.host + " " + std::to_string(config_.max_restarts));
  for (;;) {
    if (auto why = interrupted()) {
      failure = *why;
      return 0;
    }
    if (Clock::now() >= start_deadline) {
      failure = {Failure::Kind::kCause, 1, -1,
                 "node 0's ddprun at " + master() +
                     " did not start the job within " +
                     seconds_text(start_deadline - start) +
                     " (is another program on that port?)"};
      return 0;
    }
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 100);
    const bool open = receive(peer);
    for (size_t nl; (nl = peer.input.find('\n')) != std::string::npos;) {
      const std::string line = peer.input.substr(0, nl);
      peer.input.erase(0, nl + 1);
      std::istringstream in(line);
      std::string word;
      in >> word;
      if (word == "start") {
        int port = 0;
        in >> port;
        if (port > 0 && port < 65536) {
          peer.heard = Clock::now();
          return port;
        }
      } else if (word == "abort") {
        int code = 1;
        in >> code;
        std::string text;
        std::getline(in >> std::ws, text);
        failure = {Failure::Kind::kCause, code, -1, text};
        return 0;
      }
    }
    if (!open) {
      failure = {Failure::Kind::kCause, 1, -1,
                 "node 0's ddprun at " + master() +
                     " closed the connection before the job started"};
      return 0;
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
      send_line(fd, "abort 1 the job on " + config_.host + " port " +
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
      if (!peer.done && (!peer.failed || restart_ || waiting_)) {
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
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "ping") {
    return;
  }
  if (coordinator()) {
    if (word == "done" && !waiting_) {
      peer.done = true;
      finish_if_all_done();
    } else if (word == "ended") {
      peer.ended = true;
    } else if (word == "fail") {
      std::string kind;
      Failure failure;
      in >> kind >> failure.code >> failure.rank;
      std::getline(in >> std::ws, failure.text);
      // Between attempts a worker's failure is the last attempt's, late.
      const bool stale = waiting_ && restartable(failure);
      if (const auto k = kind_of(kind); k && !stale) {
        failure.kind = *k;
        if (failure.kind != Failure::Kind::kStopped) {
          peer.failed = true;
        }
        if (restart_ && !restartable(failure)) {
          cancel_restart(failure); // a node's ddprun signalled meanwhile
        } else {
          root_.report(failure, now);
        }
      }
    } else if (word == "resumed") {
      int rank = -1;
      in >> rank;
      root_.resumed(rank);
    }
  } else if ((word == "abort" || word == "restart") &&
             (!verdict_ || restart_)) { // an abort cancels a restart
    Failure failure;
    in >> failure.code;
    std::getline(in >> std::ws, failure.text);
    verdict_ = failure;
    restart_ = word == "restart";
  } else if (word == "finished") {
    finished_ = true;
    peer.done = true; // its leaving is expected
  } else if (word == "start" && waiting_) {
    int port = 0;
    in >> port;
    if (port > 0 && port < 65536) {
      start_port_ = port;
    }
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
                           one_line(failure.text));
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
                             one_line(verdict_->text));
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
                                        one_line(failure.text)) &&
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
