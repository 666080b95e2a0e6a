// AbortSignal: the one-shot "stop everything" flag a transport's blocked
// calls watch. abort() may come from any thread (the heartbeat thread, a
// signal handler's helper thread, a test); the waiting thread sees it through
// an atomic flag (spin loops) and an eventfd that becomes readable for good
// (poll loops), so every blocked and future call wakes at once.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace mddp::comm {

class AbortSignal {
 public:
  AbortSignal();
  ~AbortSignal();
  AbortSignal(const AbortSignal&) = delete;
  AbortSignal& operator=(const AbortSignal&) = delete;

  // Thread-safe, idempotent: the first reason is kept.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  std::string reason() const;
  // Readable (POLLIN) once abort() was called; never drained.
  int fd() const { return fd_; }

 private:
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::string reason_;
  int fd_ = -1;
};

}  // namespace mddp::comm
