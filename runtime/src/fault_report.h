#pragma once

// How a rank of a job fails: one line on stderr and a record for the
// launcher, never std::terminate's abort (a core dump per rank, and
// "terminate called after throwing ..." as the only explanation).
//
// The record goes to TORCHELASTIC_ERROR_FILE when the launcher sets it
// (torchrun and ddprun do), in torchelastic's format, so the launcher can
// tell the rank that failed first (a cause) from the ranks whose
// collectives broke because of it (consequences).

#include <exception>
#include <string>

namespace ddp {
namespace detail {

enum class FailureKind {
  kCollective, ///< a collective failed: a peer exited, stopped or is cut off
  kException,  ///< anything else: this rank's own error
};

/// The exception's message without c10's backtrace ("Exception raised
/// from ...").
std::string describe(const std::exception& e);

/// Writes the record of this rank's failure, once: the first call wins (a
/// collective's failure stays the record when it later ends the process).
/// Written to a temporary file and renamed, so the launcher never reads half
/// a record. No-op without TORCHELASTIC_ERROR_FILE.
void record_failure(const std::string& message, FailureKind kind);

/// Makes an uncaught exception end this rank with one line on stderr
/// ("ddp: rank R of W on HOST: ..."), the record above and exit code 1. A
/// terminate without an exception still goes to the previous handler.
void install_fault_handler(int rank, int world_size);

/// Ends this rank now: the record above, one line on stderr ("ddp: rank R
/// of W on HOST ends: MESSAGE") and exit code 1, without running exit
/// handlers (they may hold collectives the other ranks never reach). For
/// the safety nets that cannot throw into the program (destructors, exit,
/// autograd callbacks). stdout is flushed first.
[[noreturn]] void end_job(const std::string& message, FailureKind kind);

/// Whether this rank is already ending (end_job, the fault handler).
bool job_is_failing();

/// Whether a collective of this process failed (record_failure with
/// kCollective), even if the program caught the error: its peers may be
/// gone, so nothing at exit waits for them (ddp::join).
bool a_collective_failed();

/// Throws ddp::CollectiveError for a collective `what_op` that failed with
/// `e` on this rank (message with rank, host and timeout), after
/// record_failure(kCollective). Defined in distributed.cpp.
[[noreturn]] void collective_failed(const char* what_op,
                                    const std::exception& e);

/// This machine's host name (for the messages).
const std::string& host_name();

} // namespace detail
} // namespace ddp
