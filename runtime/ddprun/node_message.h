#pragma once

// One line of the protocol between the ddpruns of a job (node_link.h): its
// parsing, strict and without side effects, so that it can be tested and
// fuzzed alone. A line that is not exactly one of the messages below, or is
// longer than kMaxLineBytes, is no message (std::nullopt).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

/// The longest line a ddprun accepts from another (without its newline);
/// a peer that sends a longer one is not a ddprun. Senders shorten the free
/// text of their messages (kMaxTextBytes) so that they always fit.
constexpr std::size_t kMaxLineBytes = 4096;
constexpr std::size_t kMaxTextBytes = 2048;
/// Host names in `join`: at most this long, letters, digits and "-._:".
constexpr std::size_t kMaxHostBytes = 255;
/// The random challenges and the HMAC-SHA256 proofs, as lowercase hex.
constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kProofBytes = 32;

struct NodeMessage {
  enum class Type {
    kHello,    ///< coordinator: `hello <challenge hex | ->`
    kJoin,     ///< node: `join <node> <nnodes> <nproc> <host> <restarts>
               ///<        [<nonce hex> <proof hex> | - -]`
    kWelcome,  ///< coordinator: `welcome [<proof hex>]`
    kRefused,  ///< coordinator: `refused <text>`
    kStart,    ///< coordinator: `start <store port>`
    kAbort,    ///< coordinator: `abort <code> <text>`
    kRestart,  ///< coordinator: `restart <code> <text>`
    kFinished, ///< coordinator: `finished`
    kFail,     ///< node: `fail <kind> <code> <rank> <text>`
    kResumed,  ///< node: `resumed <rank>`
    kDone,     ///< node: `done`
    kEnded,    ///< node: `ended`
    kPing,     ///< both: `ping`
  };
  /// How a `join` proves the job token.
  enum class Proof {
    kNone,  ///< the node has no token (five fields)
    kHeld,  ///< it has one, the coordinator none (`- -`)
    kGiven, ///< nonce and proof
  };
  Type type = Type::kPing;
  // join
  int node = -1;
  int nnodes = -1;
  int nproc = -1;
  int max_restarts = -1;
  std::string host;
  Proof proof_kind = Proof::kNone;
  std::string nonce; ///< hello's challenge, join's nonce ("" for none)
  std::string proof; ///< join's and welcome's proof ("" for none)
  // fail, abort, restart, start, resumed, refused
  std::string failure_kind; ///< "cause", "consequence" or "stopped"
  int code = 1;
  int rank = -1;
  int port = 0;
  std::string text;
};

std::optional<NodeMessage> parse_message(std::string_view line);

/// Whether `c` may be part of a host name in `join`.
bool is_host_char(char c);

/// The fields of a `join` a proof covers: "join <node> ... <restarts>".
std::string join_fields(const NodeMessage& join);

/// `text` as free text of a message: one line, at most kMaxTextBytes.
std::string message_text(std::string text);

} // namespace ddprun
