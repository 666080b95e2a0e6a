#include "core/comm/work.h"

namespace mddp::comm::detail {

// No deadline here: the collective behind this work is bounded by
// CommOptions::timeout on the progress thread, and abort() fails it at once.
void WorkImpl::wait() {
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool WorkImpl::completed() const {
  std::lock_guard lock(mu_);
  return done_;
}

void WorkImpl::finish(std::exception_ptr error, int64_t end_ns) {
  {
    std::lock_guard lock(mu_);
    MDDP_CHECK(!done_, "work finished twice");
    error_ = std::move(error);
    end_ns_.store(end_ns, std::memory_order_release);
    done_ = true;
  }
  done_cv_.notify_all();
}

}  // namespace mddp::comm::detail
