// The job token and its proofs: see job_token.h.

#include "job_token.h"

#include "node_message.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cerrno>
#include <cstring>

namespace ddprun {
namespace {

std::string hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

/// HMAC-SHA256 of the parts, each followed by a NUL (none holds one), as hex.
std::string hmac(std::string_view token,
                 std::initializer_list<std::string_view> parts) {
  std::string message;
  for (auto part : parts) {
    message.append(part.data(), part.size());
    message += '\0';
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), digest, &size) == nullptr) {
    return "";
  }
  return hex(digest, size);
}

} // namespace

std::string token_problem(std::string_view token) {
  if (token.empty()) {
    return "is empty";
  }
  if (token.size() < kMinTokenBytes) {
    return "is shorter than " + std::to_string(kMinTokenBytes) +
           " characters (e.g. `openssl rand -hex 32` makes one)";
  }
  if (token.size() > kMaxTokenBytes) {
    return "is longer than " + std::to_string(kMaxTokenBytes) + " bytes";
  }
  return "";
}

std::optional<std::string> read_token_file(const std::string& path,
                                           std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error =
        "cannot read --job-token-file " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat info{};
  std::string token;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    error = "--job-token-file " + path + " is not a regular file";
  } else if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o",
                  static_cast<unsigned>(info.st_mode & 07777));
    error = "--job-token-file " + path + " has mode " + mode +
            ": others than its owner may read or change it (chmod 600 " + path +
            ")";
  } else {
    char buffer[kMaxTokenBytes + 2];
    ssize_t n = 0;
    while (token.size() <= kMaxTokenBytes &&
           (n = ::read(fd, buffer, sizeof(buffer))) != 0) {
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        error = "cannot read --job-token-file " + path + ": " +
                std::strerror(errno);
        break;
      }
      token.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (!error.empty()) {
    return std::nullopt;
  }
  // `echo secret > file` adds a newline that is no part of the secret.
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
    token.pop_back();
  }
  if (const std::string problem = token_problem(token); !problem.empty()) {
    error = "the token in --job-token-file " + path + " " + problem;
    return std::nullopt;
  }
  return token;
}

std::string random_nonce() {
  unsigned char bytes[kNonceBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return "";
  }
  return hex(bytes, sizeof(bytes));
}

std::string join_proof(std::string_view token, std::string_view challenge,
                       std::string_view nonce, std::string_view fields) {
  return hmac(token,
              {"ddprun job token v1: node joins", challenge, nonce, fields});
}

std::string welcome_proof(std::string_view token, std::string_view challenge,
                          std::string_view nonce, std::string_view fields) {
  return hmac(token, {"ddprun job token v1: coordinator welcomes", nonce,
                      challenge, fields});
}

bool proofs_equal(std::string_view expected, std::string_view proof) {
  return !expected.empty() && expected.size() == proof.size() &&
         CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

} // namespace ddprun
