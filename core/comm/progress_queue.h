// ProgressQueue: the engine under every CPU ProcessGroup (the Communicator,
// the gloo group): collectives run one at a time, in the order they were
// issued, on one progress thread, so the training thread keeps computing
// while they run; each gets a Work, a history record and, on failure, the
// error wording of failure.h. Private to the comm layer.
//
// Note [One failure ends the communicator]. A collective that fails leaves
// the ranks' message streams in an unknown state (half a ring step may have
// been sent), so nothing after it can be trusted: the first error is kept,
// the engine's I/O is stopped (on_failure: nothing more is sent or
// received), queued work fails, and every later call fails at once with a
// message that carries the first error. Recovery is a new group on every
// rank; peers still waiting on this rank see its connections close
// (PeerError) when the failed group is destroyed, or time out.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"

namespace mddp::comm::detail {

class ProgressQueue {
 public:
  // What a collective does, on the progress thread; it reports each step
  // it takes to `trace`. A throw fails the collective (and the queue).
  using Task = std::function<void(StepTrace& trace)>;
  // on_failure(reason) stops the engine's I/O so that every blocked call
  // returns at once (a transport's abort); it may be called more than once.
  // `timeout` is only quoted in error hints.
  ProgressQueue(int rank, std::chrono::milliseconds timeout,
                std::function<void(const std::string&)> on_failure);
  // Pending work fails with AbortedError; then the thread is joined.
  ~ProgressQueue();
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  // Queues `task` as collective `op` of `bytes` (for the history). Thread-safe.
  WorkPtr submit(std::string op, std::size_t bytes, Task task);
  // Fails every pending and future collective with AbortedError(reason). Thread-safe, idempotent.
  void abort(const std::string& reason);
  // The engine cannot finish the running collective, or not soon (gloo's
  // device thread died: Note [gloo's device thread dies] in
  // gloo/device_thread.h; gloo aborted: Note [Aborting gloo] in
  // gloo/gloo_group.cc): it fails now with `error`, worded as any failure,
  // and everything else as after a failure. The progress thread is left
  // where it is, inside the engine: the queue may be destroyed only once
  // settled() says it came out. Thread-safe; the first call counts.
  void abandon(std::exception_ptr error);
  // Waits up to `grace` until no collective runs on the progress thread;
  // false when one still does (after abandon(), inside an engine that has
  // not returned: the queue must then be kept, its destructor would join
  // that thread). Thread-safe.
  bool settled(std::chrono::milliseconds grace) const;
  // See Communicator::set_step_observer.
  void set_step_observer(std::function<void(const AlgoStep&, const void* data)> observer);
  std::vector<CollectiveRecord> history() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mddp::comm::detail
