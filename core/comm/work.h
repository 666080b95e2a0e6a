// WorkImpl: the Work handle the Communicator returns, completed by the
// progress thread. Private to the comm layer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "core/comm/communicator.h"

namespace mddp::comm::detail {

class WorkImpl final : public Work {
 public:
  // Blocks until finish(); rethrows its error. Thread-safe, callable repeatedly.
  void wait() override;
  bool completed() const override;
  int64_t start_ns() const override { return start_ns_.load(std::memory_order_acquire); }
  int64_t end_ns() const override { return end_ns_.load(std::memory_order_acquire); }

  // Valid once wait() returned: written by the progress thread before finish().
  const std::vector<AlgoStep>& steps() const override { return steps_; }

  void mark_started(int64_t ns) { start_ns_.store(ns, std::memory_order_release); }
  void add_step(const AlgoStep& step) {
    steps_.push_back(step);
  }  // progress thread, before finish()
  // Completes the work (error null: success) and wakes every waiter. Call once.
  void finish(std::exception_ptr error, int64_t end_ns);

 private:
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::atomic<int64_t> start_ns_{0}, end_ns_{0};
  std::vector<AlgoStep> steps_;
};

}  // namespace mddp::comm::detail
