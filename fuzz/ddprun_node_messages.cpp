// libFuzzer target: one line of ddprun's node protocol (node_message.h)
// through the parser, and through the coordinator's and a node's checks of
// the job token's proofs (job_token.h), without sockets. What it asserts:
// no crash, no undefined behaviour, a parsed `join` prints back as the
// fields it was parsed from, and no proof is accepted but the right one.
//
//   clang++-19 -std=c++17 -fsanitize=fuzzer,address,undefined \
//     -Iruntime/ddprun fuzz/ddprun_node_messages.cpp \
//     runtime/ddprun/node_message.cpp runtime/ddprun/job_token.cpp \
//     -lcrypto -o ddprun_node_messages

#include "FuzzCheck.h"
#include "job_token.h"
#include "node_message.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace {

const std::string kToken = "fuzzing-token-0123456789abcdef";
const std::string kChallenge(64, 'c');

void check_join(const ddprun::NodeMessage &join, std::string_view line) {
  const std::string fields = ddprun::join_fields(join);
  // The proof covers what was parsed, byte for byte.
  FUZZ_CHECK(line.substr(0, fields.size()) == fields);
  if (join.proof_kind != ddprun::NodeMessage::Proof::kGiven) {
    return;
  }
  // The coordinator's check: only the proof of the token over this
  // challenge, nonce and fields passes.
  const std::string expected =
      ddprun::join_proof(kToken, kChallenge, join.nonce, fields);
  FUZZ_CHECK(ddprun::proofs_equal(expected, join.proof) ==
             (expected == join.proof));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view line(reinterpret_cast<const char *>(data), size);
  const auto message = ddprun::parse_message(line);
  if (!message) {
    return 0;
  }
  using Type = ddprun::NodeMessage::Type;
  if (message->type == Type::kJoin) {
    check_join(*message, line);
  } else if (message->type == Type::kWelcome) {
    // A node's check of the coordinator's proof.
    const std::string expected = ddprun::welcome_proof(
        kToken, kChallenge, std::string(64, 'n'), "join 1 2 1 h 0");
    FUZZ_CHECK(ddprun::proofs_equal(expected, message->proof) ==
               (!message->proof.empty() && expected == message->proof));
  }
  // Free text is one line within its limit, as parsed and as re-sent.
  FUZZ_CHECK(message->text.size() <= ddprun::kMaxTextBytes &&
             message->text.find('\n') == std::string::npos &&
             ddprun::message_text(message->text) == message->text);
  return 0;
}
