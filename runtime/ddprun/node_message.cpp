// The messages between the ddpruns of a job: see node_message.h.

#include "node_message.h"

#include <charconv>
#include <vector>

namespace ddprun {
namespace {

/// The words of `line` split at single spaces; `keep_rest` words at most,
/// the last one holding the rest of the line (free text).
std::vector<std::string_view> split(std::string_view line, size_t keep_rest) {
  std::vector<std::string_view> words;
  while (!line.empty()) {
    if (words.size() + 1 == keep_rest) {
      words.push_back(line);
      break;
    }
    const size_t space = line.find(' ');
    words.push_back(line.substr(0, space));
    if (space == std::string_view::npos) {
      break;
    }
    line.remove_prefix(space + 1);
    if (line.empty()) {
      words.emplace_back(); // a trailing space: an empty word
    }
  }
  return words;
}

std::optional<int> integer(std::string_view word, long long min,
                           long long max) {
  bool negative = false;
  if (!word.empty() && word[0] == '-') {
    negative = true;
    word.remove_prefix(1);
  }
  // Canonical decimal only (no "01", no "-0"): a proof covers the fields as
  // the receiver prints them back.
  if (word.empty() || word.size() > 10 || word[0] < '0' || word[0] > '9' ||
      (word[0] == '0' && word.size() > 1) || (negative && word == "0")) {
    return std::nullopt;
  }
  long long value = 0;
  const auto [end, error] =
      std::from_chars(word.data(), word.data() + word.size(), value);
  if (error != std::errc() || end != word.data() + word.size()) {
    return std::nullopt;
  }
  value = negative ? -value : value;
  if (value < min || value > max) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

bool is_hex(std::string_view word, size_t bytes) {
  if (word.size() != 2 * bytes) {
    return false;
  }
  for (char c : word) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

bool is_host(std::string_view word) {
  if (word.empty() || word.size() > kMaxHostBytes) {
    return false;
  }
  for (char c : word) {
    if (!is_host_char(c)) {
      return false;
    }
  }
  return true;
}

/// What free text may not hold: control characters but tabs (a line is one
/// line).
bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

bool is_text(std::string_view text) {
  if (text.size() > kMaxTextBytes) {
    return false;
  }
  for (char c : text) {
    if (is_control(c)) {
      return false;
    }
  }
  return true;
}

std::optional<NodeMessage> parse_join(const std::vector<std::string_view>& w) {
  if (w.size() != 6 && w.size() != 8) {
    return std::nullopt;
  }
  NodeMessage m;
  m.type = NodeMessage::Type::kJoin;
  const auto node = integer(w[1], 0, 65535);
  const auto nnodes = integer(w[2], 1, 65536);
  const auto nproc = integer(w[3], 1, 4096);
  const auto restarts = integer(w[5], 0, 1000000);
  if (!node || !nnodes || !nproc || !restarts || !is_host(w[4])) {
    return std::nullopt;
  }
  m.node = *node;
  m.nnodes = *nnodes;
  m.nproc = *nproc;
  m.host = std::string(w[4]);
  m.max_restarts = *restarts;
  if (w.size() == 8) {
    if (w[6] == "-" && w[7] == "-") {
      m.proof_kind = NodeMessage::Proof::kHeld;
    } else if (is_hex(w[6], kNonceBytes) && is_hex(w[7], kProofBytes)) {
      m.proof_kind = NodeMessage::Proof::kGiven;
      m.nonce = std::string(w[6]);
      m.proof = std::string(w[7]);
    } else {
      return std::nullopt;
    }
  }
  return m;
}

/// `<word> <code> <text>`: abort, restart.
std::optional<NodeMessage>
parse_verdict(NodeMessage::Type type, const std::vector<std::string_view>& w) {
  if (w.size() < 2) {
    return std::nullopt;
  }
  const auto code = integer(w[1], 0, 255);
  const std::string_view text = w.size() > 2 ? w[2] : std::string_view();
  if (!code || !is_text(text)) {
    return std::nullopt;
  }
  NodeMessage m;
  m.type = type;
  m.code = *code;
  m.text = std::string(text);
  return m;
}

std::optional<NodeMessage> parse_fail(const std::vector<std::string_view>& w) {
  if (w.size() < 4) {
    return std::nullopt;
  }
  const auto code = integer(w[2], 0, 255);
  const auto rank = integer(w[3], -1, 1 << 30);
  const std::string_view text = w.size() > 4 ? w[4] : std::string_view();
  if (!(w[1] == "cause" || w[1] == "consequence" || w[1] == "stopped") ||
      !code || !rank || !is_text(text)) {
    return std::nullopt;
  }
  NodeMessage m;
  m.type = NodeMessage::Type::kFail;
  m.failure_kind = std::string(w[1]);
  m.code = *code;
  m.rank = *rank;
  m.text = std::string(text);
  return m;
}

std::optional<NodeMessage> only(NodeMessage::Type type,
                                const std::vector<std::string_view>& w) {
  if (w.size() != 1) {
    return std::nullopt;
  }
  NodeMessage m;
  m.type = type;
  return m;
}

} // namespace

std::optional<NodeMessage> parse_message(std::string_view line) {
  using Type = NodeMessage::Type;
  if (line.size() > kMaxLineBytes || line.empty()) {
    return std::nullopt;
  }
  const size_t space = line.find(' ');
  const std::string_view word = line.substr(0, space);
  if (word == "fail") {
    return parse_fail(split(line, 5));
  }
  if (word == "abort" || word == "restart") {
    return parse_verdict(word == "abort" ? Type::kAbort : Type::kRestart,
                         split(line, 3));
  }
  if (word == "refused") {
    const auto w = split(line, 2);
    if (w.size() != 2 || w[1].empty() || !is_text(w[1])) {
      return std::nullopt;
    }
    NodeMessage m;
    m.type = Type::kRefused;
    m.text = std::string(w[1]);
    return m;
  }
  const auto w = split(line, 0);
  if (word == "join") {
    return parse_join(w);
  }
  if (word == "hello" && w.size() == 2 &&
      (w[1] == "-" || is_hex(w[1], kNonceBytes))) {
    NodeMessage m;
    m.type = Type::kHello;
    m.nonce = w[1] == "-" ? "" : std::string(w[1]);
    return m;
  }
  if (word == "welcome" &&
      (w.size() == 1 || (w.size() == 2 && is_hex(w[1], kProofBytes)))) {
    NodeMessage m;
    m.type = Type::kWelcome;
    m.proof = w.size() == 2 ? std::string(w[1]) : "";
    return m;
  }
  if ((word == "start" || word == "resumed") && w.size() == 2) {
    const bool start = word == "start";
    const auto value =
        start ? integer(w[1], 1, 65535) : integer(w[1], -1, 1 << 30);
    if (!value) {
      return std::nullopt;
    }
    NodeMessage m;
    m.type = start ? Type::kStart : Type::kResumed;
    (start ? m.port : m.rank) = *value;
    return m;
  }
  if (word == "finished") {
    return only(Type::kFinished, w);
  }
  if (word == "done") {
    return only(Type::kDone, w);
  }
  if (word == "ended") {
    return only(Type::kEnded, w);
  }
  if (word == "ping") {
    return only(Type::kPing, w);
  }
  return std::nullopt;
}

bool is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == ':';
}

std::string join_fields(const NodeMessage& join) {
  return "join " + std::to_string(join.node) + " " +
         std::to_string(join.nnodes) + " " + std::to_string(join.nproc) + " " +
         join.host + " " + std::to_string(join.max_restarts);
}

std::string message_text(std::string text) {
  for (char& c : text) {
    c = is_control(c) ? ' ' : c;
  }
  if (text.size() > kMaxTextBytes) {
    text.resize(kMaxTextBytes - 3);
    text += "...";
  }
  return text;
}

} // namespace ddprun
