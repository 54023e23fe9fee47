// ddprun's node messages (node_message.h) and job token (job_token.h): the
// strict parsing of each line, and the proofs of the token.

#include "job_token.h"
#include "node_message.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

using ddprun::NodeMessage;
using ddprun::parse_message;
using Type = NodeMessage::Type;

const std::string kHex64(64, 'a');

TEST(NodeMessage, ParsesEveryMessage) {
  auto join = parse_message("join 1 2 4 host-1.example 3");
  ASSERT_TRUE(join);
  EXPECT_EQ(join->type, Type::kJoin);
  EXPECT_EQ(join->node, 1);
  EXPECT_EQ(join->nnodes, 2);
  EXPECT_EQ(join->nproc, 4);
  EXPECT_EQ(join->host, "host-1.example");
  EXPECT_EQ(join->max_restarts, 3);
  EXPECT_EQ(join->proof_kind, NodeMessage::Proof::kNone);
  EXPECT_EQ(ddprun::join_fields(*join), "join 1 2 4 host-1.example 3");

  join = parse_message("join 1 2 4 h 0 " + kHex64 + " " + kHex64);
  ASSERT_TRUE(join);
  EXPECT_EQ(join->proof_kind, NodeMessage::Proof::kGiven);
  EXPECT_EQ(join->nonce, kHex64);
  join = parse_message("join 1 2 4 h 0 - -");
  ASSERT_TRUE(join);
  EXPECT_EQ(join->proof_kind, NodeMessage::Proof::kHeld);

  auto hello = parse_message("hello " + kHex64);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->type, Type::kHello);
  EXPECT_EQ(hello->nonce, kHex64);
  hello = parse_message("hello -");
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->nonce, "");

  auto fail = parse_message("fail consequence 1 -1 rank 3 lost its peer");
  ASSERT_TRUE(fail);
  EXPECT_EQ(fail->type, Type::kFail);
  EXPECT_EQ(fail->failure_kind, "consequence");
  EXPECT_EQ(fail->code, 1);
  EXPECT_EQ(fail->rank, -1);
  EXPECT_EQ(fail->text, "rank 3 lost its peer");

  auto abort = parse_message("abort 137 worker rank 3 was killed");
  ASSERT_TRUE(abort);
  EXPECT_EQ(abort->type, Type::kAbort);
  EXPECT_EQ(abort->code, 137);
  EXPECT_EQ(abort->text, "worker rank 3 was killed");
  EXPECT_EQ(parse_message("restart 3 x")->type, Type::kRestart);
  EXPECT_EQ(parse_message("start 29501")->port, 29501);
  EXPECT_EQ(parse_message("resumed 2")->rank, 2);
  EXPECT_EQ(parse_message("refused no token")->text, "no token");
  EXPECT_EQ(parse_message("welcome")->proof, "");
  EXPECT_EQ(parse_message("welcome " + kHex64)->proof, kHex64);
  EXPECT_EQ(parse_message("done")->type, Type::kDone);
  EXPECT_EQ(parse_message("ended")->type, Type::kEnded);
  EXPECT_EQ(parse_message("finished")->type, Type::kFinished);
  EXPECT_EQ(parse_message("ping")->type, Type::kPing);
}

TEST(NodeMessage, RefusesWhatIsNotExactlyAMessage) {
  for (const std::string& line :
       std::vector<std::string>{"",
                                "ping ",
                                " ping",
                                "pingx",
                                "done 1",
                                "join",
                                "join 1 2 4 h",
                                "join 1 2 4 h 0 1",
                                "join 1 2 4 h x",
                                "join -1 2 4 h 0",
                                "join 1 0 4 h 0",
                                "join 1 2 0 h 0",
                                "join 1 2 4 h 0 - x",
                                "join 1 2 4 h\tx 0",
                                "join 01 2 4 h 0",
                                "resumed -0",
                                "join 1 2 4 h  0",
                                "join 99999999999 2 4 h 0",
                                "hello",
                                "hello abc",
                                "hello " + std::string(64, 'A'),
                                "hello " + std::string(62, 'a'),
                                "welcome x",
                                "start 0",
                                "start 65536",
                                "start",
                                "start 80x",
                                "abort",
                                "abort x text",
                                "abort 256 text",
                                "abort 1 a\x01z",
                                "fail cause 1",
                                "fail bad 1 1 x",
                                "fail cause 1 1 x\ny",
                                "resumed",
                                "refused",
                                "refused ",
                                "unknown 1"}) {
    EXPECT_FALSE(parse_message(line)) << "'" << line << "'";
  }
  EXPECT_FALSE(
      parse_message("abort 1 " + std::string(ddprun::kMaxLineBytes, 'x')));
  EXPECT_FALSE(parse_message("join 1 2 4 " + std::string(256, 'h') + " 0"));
  // At the limits, still messages.
  EXPECT_TRUE(
      parse_message("abort 1 " + std::string(ddprun::kMaxTextBytes, 'x')));
  EXPECT_TRUE(parse_message("abort 1"));
  EXPECT_TRUE(parse_message("join 1 2 4 " + std::string(255, 'h') + " 0"));
}

TEST(NodeMessage, TextIsOneLineThatFits) {
  EXPECT_EQ(ddprun::message_text("a\nb\rc"), "a b c");
  const std::string longer =
      ddprun::message_text(std::string(3 * ddprun::kMaxTextBytes, 'x'));
  EXPECT_EQ(longer.size(), ddprun::kMaxTextBytes);
  EXPECT_TRUE(parse_message("abort 1 " + longer));
}

TEST(JobToken, ProofsBindTokenChallengeNonceAndFields) {
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::string c = std::string(64, '1'), n = std::string(64, '2');
  const std::string fields = "join 1 2 4 h 0";
  const std::string proof = ddprun::join_proof(token, c, n, fields);
  EXPECT_EQ(proof.size(), 64u);
  EXPECT_TRUE(parse_message(fields + " " + n + " " + proof));
  EXPECT_TRUE(
      ddprun::proofs_equal(proof, ddprun::join_proof(token, c, n, fields)));
  EXPECT_FALSE(ddprun::proofs_equal(
      proof, ddprun::join_proof(token + "x", c, n, fields)));
  EXPECT_FALSE(
      ddprun::proofs_equal(proof, ddprun::join_proof(token, n, c, fields)));
  EXPECT_FALSE(ddprun::proofs_equal(
      proof, ddprun::join_proof(token, c, n, "join 1 2 4 h 1")));
  // The coordinator's proof is no node's: a reflected proof fails.
  EXPECT_FALSE(
      ddprun::proofs_equal(proof, ddprun::welcome_proof(token, c, n, fields)));
  EXPECT_FALSE(ddprun::proofs_equal(proof, proof.substr(1)));
  EXPECT_FALSE(ddprun::proofs_equal("", ""));
  // The token itself is in no proof.
  EXPECT_EQ(proof.find(token), std::string::npos);
  const std::string a = ddprun::random_nonce(), b = ddprun::random_nonce();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

TEST(JobToken, TokenFileIsTheOwnersAndLongEnough) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ddprun_token_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& content,
                   mode_t mode) {
    const auto path = (dir / name).string();
    std::ofstream(path) << content;
    ::chmod(path.c_str(), mode);
    return path;
  };
  std::string error;
  auto token = ddprun::read_token_file(
      write("good", "0123456789abcdef-secret\n", 0600), error);
  ASSERT_TRUE(token) << error;
  EXPECT_EQ(*token, "0123456789abcdef-secret");
  struct Case {
    std::string path;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {write("shared", "0123456789abcdef-secret", 0644), "has mode 0644"},
           {write("group", "0123456789abcdef-secret", 0640), "has mode 0640"},
           {write("empty", "\n", 0600), "is empty"},
           {write("short", "secret", 0600), "shorter than 16"},
           {(dir / "missing").string(), "No such file"},
           {dir.string(), "not a regular file"}}) {
    error.clear();
    EXPECT_FALSE(ddprun::read_token_file(c.path, error)) << c.path;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
  EXPECT_EQ(ddprun::token_problem(""), "is empty");
  EXPECT_EQ(ddprun::token_problem("0123456789abcdef"), "");
  std::filesystem::remove_all(dir);
}

} // namespace
