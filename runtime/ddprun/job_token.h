#pragma once

// The job token: a secret every ddpruns of one job holds, proved with a
// challenge and an HMAC-SHA256, never sent (node_link.h). Needs libcrypto.

#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

/// Tokens shorter than this are refused (guessable).
constexpr std::size_t kMinTokenBytes = 16;
constexpr std::size_t kMaxTokenBytes = 4096;

/// The token in `path`, read once: a regular file that only its owner may
/// read or write (as ssh requires of private keys), its content without
/// the trailing newline, kMinTokenBytes to kMaxTokenBytes long. On error:
/// std::nullopt and `error` says why, in a line.
std::optional<std::string> read_token_file(const std::string& path,
                                           std::string& error);
/// The same checks for a token from DDP_JOB_TOKEN ("" when it is fine).
std::string token_problem(std::string_view token);

/// kNonceBytes fresh random bytes as hex, "" when the system has none.
std::string random_nonce();

/// What a node sends to prove it holds `token`: HMAC-SHA256 (hex) over the
/// coordinator's challenge, the node's own nonce and its join fields.
std::string join_proof(std::string_view token, std::string_view challenge,
                       std::string_view nonce, std::string_view fields);
/// What the coordinator answers: the same over the node's nonce first and
/// another context, so neither proof can be replayed as the other.
std::string welcome_proof(std::string_view token, std::string_view challenge,
                          std::string_view nonce, std::string_view fields);

/// Whether `proof` (hex, from the peer) equals `expected`, in constant time.
bool proofs_equal(std::string_view expected, std::string_view proof);

} // namespace ddprun
