// DeviceThread: what microddp does when an exception escapes gloo's own
// device thread. Private to the gloo backend (includes gloo's headers).
//
// Note [gloo's device thread dies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A gloo tcp Device runs the I/O of all its pairs on one thread of its own
// (its Loop). A few of gloo's paths throw there, where nothing catches:
// a control message written to a connection that just broke
// (Pair::handleRemotePendingRecv -> sendAsyncMode -> throwIfException, in
// Debian's libgloo 2022-05-18 and still at gloo's HEAD). std::terminate
// then ended the worker, and the coordinator named as dead a rank that had
// only lost a link (1 run in about 30 of fault.link_cut_gloo).
//
// So microddp learns the thread's id when it connects (a probe descriptor
// the loop reports on once) and installs a terminate handler: on that
// thread, it hands the exception to the group as the error of its running
// collective (the training thread then reports the broken link as it would
// any other) and parks the thread for good. It cannot let the thread go
// on: nothing was unwound (the broken pair's lock is still held, no loop
// tick will come), so from then on nothing may touch that context: the
// group does not close its pairs, its progress thread, inside gloo, is left
// there, and the group is kept, never destroyed (destroying the context
// would join the parked thread). The process ends soon after with the
// job's verdict; a later attempt connects a new context.
#pragma once

#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace mddp::comm::gloo {

class DeviceThread {
 public:
  // Called on the dying device thread with the exception that escaped it.
  using OnDeath = std::function<void(std::exception_ptr)>;

  // Learns the id of `device`'s thread (a gloo tcp Device) within `timeout`
  // and watches it; on_death is called at most once.
  DeviceThread(std::shared_ptr<::gloo::transport::Device> device, OnDeath on_death,
               std::chrono::milliseconds timeout);
  // Stops watching. Must not be called once the thread died (see the Note).
  ~DeviceThread();
  DeviceThread(const DeviceThread&) = delete;
  DeviceThread& operator=(const DeviceThread&) = delete;

  // Test seam: the device thread throws ::gloo::IoException(what), as
  // gloo's own paths do (MDDP_TEST_GLOO_DEVICE_THROW_MS in gloo_group.cc).
  void throw_for_test(const std::string& what);

  struct Probe;  // device_thread.cc

 private:
  std::shared_ptr<::gloo::transport::tcp::Device> device_;
  std::unique_ptr<Probe> probe_;
};

}  // namespace mddp::comm::gloo
