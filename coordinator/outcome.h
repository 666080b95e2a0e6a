// The vocabulary of the coordinator's state classes: how an operation ended
// (Outcome), the clock they are driven by, and a ticket that names a pending
// wait so it can be cancelled. No gRPC here: service.cc maps Code onto
// grpc::StatusCode one to one.
//
// Note [Waits complete exactly once]: every operation that can wait (join,
// validate, get, barrier) takes a callback and returns a Ticket. The callback
// runs exactly once: inline when the answer is known at once, else when the
// wait is satisfied, its deadline passes (expire(now)), it is cancelled
// (cancel(ticket), e.g. the client went away) or the job is aborted
// (abort(why)). Callbacks never run under the class's lock, so they may call
// back into it. The classes never read the clock: `now` comes from the
// caller, so tests drive time by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "control/duration.h"

namespace mddp::coordinator {

// The coordinator speaks the control plane's types (control/, shared with
// the worker) as its own.
using namespace control;

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

enum class Code {
  kOk,
  kInvalidArgument,     // malformed request (bad rank, empty key, too large)
  kUnauthenticated,     // wrong token, unknown session
  kFailedPrecondition,  // another job, another protocol version, fingerprints differ
  kAlreadyExists,       // requested rank taken
  kResourceExhausted,   // the job is already full
  kDeadlineExceeded,    // a wait ran out
  kAborted,             // the job failed while this call waited
  kCancelled,           // the caller went away
};

const char* to_string(Code code);

struct Outcome {
  Code code = Code::kOk;
  std::string message;  // one line a user can act on ("" when ok)

  bool ok() const { return code == Code::kOk; }
  static Outcome success() { return {}; }
  static Outcome error(Code code, std::string message) { return {code, std::move(message)}; }
};

// Names one pending wait (see Note [Waits complete exactly once]).
struct Ticket {
  enum class Kind { kNone, kJoin, kValidate, kGet, kBarrier };
  Kind kind = Kind::kNone;
  uint64_t id = 0;
};

// A process-wide unique ticket id.
uint64_t next_ticket_id();

// Takes the waiters of `waiters` (a map of id -> {deadline, done, ...})
// whose deadline has passed at `now`, pairing each callback with a
// kDeadlineExceeded outcome whose message is why(waiter). Call under the
// owner's lock; fire the callbacks after releasing it.
template <typename Map, typename Why>
auto take_expired(Map& waiters, TimePoint now, Why why) {
  using Callback = decltype(Map::mapped_type::done);
  std::vector<std::pair<Callback, Outcome>> fire;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    fire.emplace_back(std::move(it->second.done),
                      Outcome::error(Code::kDeadlineExceeded, why(it->second)));
    it = waiters.erase(it);
  }
  return fire;
}

}  // namespace mddp::coordinator
