#include "core/comm/transport/abort_signal.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/comm/types.h"

namespace mddp::comm {

AbortSignal::AbortSignal() {
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ < 0) throw CommError(str("eventfd failed: ", std::strerror(errno)));
}

AbortSignal::~AbortSignal() {
  ::close(fd_);
}

void AbortSignal::abort(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  uint64_t one = 1;
  ssize_t n = ::write(fd_, &one, sizeof one);  // cannot fail short of a full counter
  (void)n;
}

std::string AbortSignal::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

}  // namespace mddp::comm
