// LibTorch's own logging in a ddp job: see libtorch_logging.h.

#include "libtorch_logging.h"

#include <c10/util/Logging.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>

namespace ddp {
namespace detail {
namespace {

bool debug_switch() {
  const char* value = std::getenv("DDP_DEBUG");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

bool user_log_level() {
  const char* value = std::getenv("TORCH_CPP_LOG_LEVEL");
  return value != nullptr && *value != '\0';
}

const char kBannerStart[] = "[Gloo] Rank ";

} // namespace

bool libtorch_logging_asked() { return debug_switch() || user_log_level(); }

void configure_libtorch_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    // What LibTorch 1.13 (c10 on glog, Debian's) and 2.x (c10's own logger,
    // the wheel) both have: the flag caffe2_log_level, which gates c10's
    // LOG() in 2.x and every C10D_* message in both, initLogging(), which
    // reads TORCH_CPP_LOG_LEVEL into it, and UpdateLoggingLevelsFromFlags(),
    // which with glog lowers glog's minloglevel to it and logs to stderr.
    // A C++ program never calls initLogging() itself (PyTorch calls it at
    // import), so TORCH_CPP_LOG_LEVEL is applied here. glog itself is never
    // initialized: InitGoogleLogging() twice aborts, and a program may call
    // it after ddp::init.
    if (user_log_level()) {
      c10::initLogging();
    } else if (debug_switch()) {
      FLAGS_caffe2_log_level = 0; // INFO: c10d's start-up steps too.
      c10::UpdateLoggingLevelsFromFlags();
    }
  });
}

bool is_healthy_gloo_banner(const std::string& line) {
  static const std::regex banner(
      "\\[Gloo\\] Rank [0-9]+ is connected to ([0-9]+) peer ranks\\. "
      "Expected number of connected peer ranks is : ([0-9]+)\\s*");
  std::smatch match;
  return std::regex_match(line, match, banner) && match[1] == match[2];
}

GlooBannerFilter::~GlooBannerFilter() { flush_pending(); }

bool GlooBannerFilter::may_be_banner() const {
  const std::size_t n = std::min(line_.size(), sizeof(kBannerStart) - 1);
  return line_.compare(0, n, kBannerStart, n) == 0;
}

void GlooBannerFilter::put(char ch) {
  if (ch == '\n') {
    end_line();
  } else if (passing_) {
    out_->sputc(ch);
  } else {
    line_.push_back(ch);
    if (!may_be_banner()) {
      // Not Gloo's line: what is held goes out now, as the program wrote
      // it, and the rest of the line after it.
      out_->sputn(line_.data(), static_cast<std::streamsize>(line_.size()));
      line_.clear();
      passing_ = true;
    }
  }
}

void GlooBannerFilter::end_line() {
  if (passing_ || !is_healthy_gloo_banner(line_)) {
    line_.push_back('\n');
    out_->sputn(line_.data(), static_cast<std::streamsize>(line_.size()));
  }
  line_.clear();
  passing_ = false;
}

GlooBannerFilter::int_type GlooBannerFilter::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) {
    return traits_type::not_eof(ch);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  put(traits_type::to_char_type(ch));
  return ch;
}

std::streamsize GlooBannerFilter::xsputn(const char* text,
                                         std::streamsize count) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::streamsize i = 0; i < count; ++i) {
    put(text[i]);
  }
  return count;
}

int GlooBannerFilter::sync() {
  std::lock_guard<std::mutex> lock(mutex_);
  // A line that may still be Gloo's stays held until it ends.
  return out_->pubsync();
}

void GlooBannerFilter::flush_pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  out_->sputn(line_.data(), static_cast<std::streamsize>(line_.size()));
  line_.clear();
  passing_ = false;
  out_->pubsync();
}

GlooConnectQuiet::GlooConnectQuiet() {
  if (libtorch_logging_asked()) {
    return;
  }
  previous_ = std::cout.rdbuf();
  filter_ = new GlooBannerFilter(previous_);
  std::cout.flush();
  std::cout.rdbuf(filter_);
}

GlooConnectQuiet::~GlooConnectQuiet() {
  if (filter_ == nullptr) {
    return;
  }
  std::cout.rdbuf(previous_);
  filter_->flush_pending();
  delete filter_;
}

} // namespace detail
} // namespace ddp
