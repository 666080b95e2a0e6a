// How a failed control-plane call reads: one line naming the call and the
// coordinator's address, with what to check (CoordinatorError), and, for a
// connection that failed while it was set up, why waiting cannot help (TLS
// on one side only, a certificate refused).
#pragma once

#include <chrono>
#include <string>

#include "core/common/check.h"

namespace grpc {
class Status;
}

namespace mddp::worker {

using Millis = std::chrono::milliseconds;

// A control-plane call failed. what() is one line naming the call and the
// coordinator; code() is the gRPC status code (grpc::StatusCode as int).
class CoordinatorError : public Error {
 public:
  CoordinatorError(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const { return code_; }
  bool unreachable() const;  // UNAVAILABLE, or DEADLINE_EXCEEDED before an answer

 private:
  int code_;
};

// The error call `call` to the coordinator at `address` ended with, `s`,
// worded for the user: unreachable, no answer within `deadline`, a gRPC
// failure, or the coordinator's own refusal (worded for the user already).
CoordinatorError call_error(const std::string& call, const std::string& address,
                            const grpc::Status& s, Millis deadline);

// Why a connection that failed during set-up (gRPC's `message`) cannot
// succeed however long we wait — TLS on one side only, or a certificate
// refused — or "" when it may (e.g. the coordinator is not listening yet).
// `tls`: whether this worker speaks TLS.
std::string tls_mismatch(const std::string& message, bool tls);

}  // namespace mddp::worker
