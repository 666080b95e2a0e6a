// Verdict: why a job failed, typed for whoever acts on it: a person reads
// the one line (`message`, printed by the coordinator, every worker and
// `run`); a restart policy reads the rest: the cause, the rank at fault with
// its host and pid, what it was last seen doing, and for a broken link both
// ends. See docs/failures.md for what each cause looks like and how fast it
// is seen.
#pragma once

#include <cstdint>
#include <string>

namespace mddp::control {

enum class Cause {
  kNone,
  kRankError,           // a rank left with an error of its own (its message)
  kProcessDied,         // a rank's process ended without leaving: crash, kill -9, OOM kill
  kHeartbeatTimeout,    // a rank went silent with its connection open: hung, stopped, cut off
  kLinkBroken,          // the data-plane connection between two live ranks broke: a network fault
  kCoordinatorStalled,  // the coordinator itself did not run as long as the workers wait for it
  kModelMismatch,       // a rank built another model (fingerprint)
  kRendezvousTimeout,   // not every worker joined in time
  kShutdown,            // the coordinator was stopped (Ctrl-C, SIGTERM)
  // No failure: a worker joined a job that shrank (--on-failure heal); the
  // attempt ends so that the next one takes it in (Note [Healing] in
  // coordinator/job.cc).
  kGrow,
};
// "rank error", "process died", "heartbeat timeout", "link broken", ...
const char* to_string(Cause c);
// Whether a restart can cure it (Note [What is restarted] in
// coordinator/restarts.cc): a process that died, hung or lost its link,
// yes; a rank's own error (a diverged loss, a bad file, Ctrl-C), a model
// mismatch, a rendezvous that timed out, a stalled coordinator or a
// shutdown, no.
bool restartable(Cause c);

struct Verdict {
  Cause cause = Cause::kNone;
  int rank = -1;          // the rank at fault (kLinkBroken: the lower end); -1: none
  int peer = -1;          // kLinkBroken: the other end; -1 otherwise
  std::string host{};     // rank's host
  int64_t pid = 0;        // rank's process id as it joined (0: not known)
  std::string doing{};    // what rank was last seen doing: "backward of step 204", "" if not known
  std::string message{};  // the one line

  // The rank whose own fault the failure is; -1 when it is no single rank's
  // (a broken link, a stalled coordinator, a rendezvous timeout, a shutdown).
  int failed_rank() const;
};

}  // namespace mddp::control
