#include "coordinator/outcome.h"

#include <atomic>

namespace mddp::coordinator {

const char* to_string(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kFailedPrecondition:
      return "failed precondition";
    case Code::kAlreadyExists:
      return "already exists";
    case Code::kResourceExhausted:
      return "resource exhausted";
    case Code::kDeadlineExceeded:
      return "deadline exceeded";
    case Code::kAborted:
      return "aborted";
    case Code::kCancelled:
      return "cancelled";
  }
  return "?";
}

uint64_t next_ticket_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace mddp::coordinator
