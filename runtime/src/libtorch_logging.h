// LibTorch's own logging in a ddp job: quiet starts, and the debug switch
// that brings LibTorch's logging back (docs/runtime-core.md, "Logging").
//
// A healthy start of a job prints what the program prints and the runtime's
// own one-line messages. The start-up noise is removed at its cause where
// there is one (store_listen.cpp: 1.13's failed IPv6 look-up); Gloo's
// "[Gloo] Rank r is connected to n peer ranks" line of 2.x, which Gloo writes
// to std::cout at every group it connects, is held back while a Gloo group
// connects (GlooConnectQuiet) when it reports every peer connected. Warnings
// and errors of c10d keep LibTorch's default level (WARNING) and reach the
// user.
#pragma once

#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>

namespace ddp {
namespace detail {

/// Whether LibTorch's own logging is asked for: DDP_DEBUG set to anything but
/// "" or "0", or TORCH_CPP_LOG_LEVEL set by the user.
bool libtorch_logging_asked();

/// Once per process, before the first store or group: with DDP_DEBUG, c10's
/// log level INFO (or TORCH_CPP_LOG_LEVEL's, when also set); with
/// TORCH_CPP_LOG_LEVEL alone, that level, as PyTorch applies it at import;
/// otherwise LibTorch's levels are left as they are.
void configure_libtorch_logging();

/// The lines written through it go on to `out`, but a line Gloo writes when
/// a group has connected every peer ("[Gloo] Rank r is connected to n peer
/// ranks. Expected number of connected peer ranks is : n") is dropped. One
/// that reports a peer missing passes. Safe to write to from several threads.
class GlooBannerFilter : public std::streambuf {
public:
  explicit GlooBannerFilter(std::streambuf* out) : out_(out) {}
  ~GlooBannerFilter() override;

  /// Writes out what is held (a line not yet ended).
  void flush_pending();

protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* text, std::streamsize count) override;
  int sync() override;

private:
  void put(char ch);
  void end_line();
  /// Whether the held text may still become Gloo's line.
  bool may_be_banner() const;

  std::streambuf* out_;
  std::mutex mutex_;
  /// The held start of a line that may be Gloo's.
  std::string line_;
  /// The current line is not Gloo's: it goes straight out.
  bool passing_ = false;
};

/// Whether `line` (without its newline) is Gloo's line of a group with every
/// peer connected.
bool is_healthy_gloo_banner(const std::string& line);

/// While one lives (on a start without the debug switch), std::cout goes
/// through a GlooBannerFilter.
class GlooConnectQuiet {
public:
  GlooConnectQuiet();
  ~GlooConnectQuiet();
  GlooConnectQuiet(const GlooConnectQuiet&) = delete;
  GlooConnectQuiet& operator=(const GlooConnectQuiet&) = delete;

private:
  std::streambuf* previous_ = nullptr;
  GlooBannerFilter* filter_ = nullptr;
};

} // namespace detail
} // namespace ddp
