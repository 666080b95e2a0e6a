#include "core/comm/gloo/device_thread.h"

#include <gloo/common/error.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/comm/communicator.h"
#include "core/common/check.h"

namespace mddp::comm::gloo {

// An eventfd on the device's loop: the first event it reports tells the
// thread's id; the test seam's makes it throw.
struct DeviceThread::Probe final : ::gloo::transport::tcp::Handler {
  int fd = -1;
  OnDeath on_death;

  std::mutex mu;
  std::condition_variable known;
  std::optional<std::thread::id> id;  // the device thread's, once it reported
  std::string throw_what;             // the test seam's

  void poke() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }

  // Takes the probe off `device`'s loop and closes it: no handler runs after
  // this. gloo waits for a tick of its loop; a handler still in flight ends
  // by unlocking `mu`.
  void unregister(::gloo::transport::tcp::Device& device) {
    device.unregisterDescriptor(fd, this);
    std::lock_guard lock(mu);
    ::close(fd);
  }

  // On the device thread. Its last use of the probe is unlocking `mu`
  // (See unregister).
  void handleEvents(int /*events*/) override {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd, &count, sizeof count);
    std::string what;
    {
      std::lock_guard lock(mu);
      if (!id) id = std::this_thread::get_id();
      what.swap(throw_what);
      known.notify_all();
    }
    if (!what.empty()) throw ::gloo::IoException(what);
  }
};

namespace {

// The watched device threads by id; guards their probes' lifetime too. A
// thread that died is no longer watched.
std::mutex watched_mu;
std::map<std::thread::id, DeviceThread::Probe*>& watched() {
  static auto* m =
      new std::map<std::thread::id, DeviceThread::Probe*>();  // never destroyed: used at exit
  return *m;
}
std::terminate_handler previous_handler = nullptr;

// See Note [gloo's device thread dies].
[[noreturn]] void on_terminate() {
  if (std::exception_ptr error = std::current_exception()) {
    std::unique_lock lock(watched_mu);
    if (auto dying = watched().extract(std::this_thread::get_id())) {
      dying.mapped()->on_death(error);
      lock.unlock();
      for (;;) std::this_thread::sleep_for(std::chrono::hours(24));  // parked for good
    }
  }
  if (previous_handler) previous_handler();
  std::abort();
}

}  // namespace

DeviceThread::DeviceThread(std::shared_ptr<::gloo::transport::Device> device, OnDeath on_death,
                           std::chrono::milliseconds timeout)
    : device_(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(device)),
      probe_(std::make_unique<Probe>()) {
  static std::once_flag installed;
  std::call_once(installed, [] { previous_handler = std::set_terminate(on_terminate); });
  MDDP_CHECK(device_ != nullptr, "gloo's device is not a tcp device");
  probe_->on_death = std::move(on_death);
  probe_->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (probe_->fd < 0) throw CommError(str("gloo: eventfd: ", std::strerror(errno)));
  device_->registerDescriptor(probe_->fd, EPOLLIN, probe_.get());
  probe_->poke();
  bool reported;
  {
    std::unique_lock lock(probe_->mu);
    reported = probe_->known.wait_for(lock, timeout, [&] { return probe_->id.has_value(); });
  }
  if (!reported) {
    probe_->unregister(*device_);
    throw CommError(str("gloo's device thread did not run within ", timeout.count(), " ms"));
  }
  std::lock_guard watch(watched_mu);
  watched()[*probe_->id] = probe_.get();
}

DeviceThread::~DeviceThread() {
  {
    std::lock_guard lock(watched_mu);
    watched().erase(*probe_->id);
  }
  probe_->unregister(*device_);
}

void DeviceThread::throw_for_test(const std::string& what) {
  {
    std::lock_guard lock(probe_->mu);
    probe_->throw_what = what;
  }
  probe_->poke();
}

}  // namespace mddp::comm::gloo
