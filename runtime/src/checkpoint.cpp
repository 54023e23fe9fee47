// ddp::load and ddp::exists_on_main (checkpoint.h).

#include <ddp/checkpoint.h>

#include <torch/torch.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <sys/stat.h>

namespace ddp {

namespace detail {

std::string file_bytes_from_main(const std::string& path) {
  std::string bytes;
  std::string error;
  if (ddp::rank() == 0) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = std::string("cannot open it: ") + std::strerror(errno);
    } else {
      bytes.assign(std::istreambuf_iterator<char>(in),
                   std::istreambuf_iterator<char>());
      if (in.bad()) {
        error = "cannot read it";
      }
    }
  }
  // Its size first (-1: rank 0 could not read it), then the bytes.
  auto size = torch::tensor(
      {static_cast<int64_t>(error.empty() ? bytes.size() : -1)}, torch::kLong);
  ddp::broadcast(size, 0);
  const int64_t n = size.item<int64_t>();
  if (n < 0) {
    throw std::runtime_error("ddp::load: rank 0 cannot read '" + path + "'" +
                             (error.empty() ? "" : ": " + error));
  }
  auto buffer = torch::empty({n}, torch::kUInt8);
  if (ddp::rank() == 0 && n > 0) {
    std::memcpy(buffer.data_ptr<uint8_t>(), bytes.data(),
                static_cast<size_t>(n));
  }
  if (n > 0) {
    ddp::broadcast(buffer, 0);
  }
  return std::string(reinterpret_cast<const char*>(buffer.data_ptr<uint8_t>()),
                     static_cast<size_t>(n));
}

} // namespace detail

bool exists_on_main(const std::string& path) {
  struct stat info{};
  const bool here = ::stat(path.c_str(), &info) == 0;
  if (!ddp::is_distributed()) {
    return here;
  }
  auto flag = torch::tensor({static_cast<int64_t>(here ? 1 : 0)}, torch::kLong);
  ddp::broadcast(flag, 0);
  return flag.item<int64_t>() != 0;
}

} // namespace ddp
