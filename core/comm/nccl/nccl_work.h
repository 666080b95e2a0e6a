// The NCCL group's shared state and its Work handle. Private to core/comm/nccl.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "core/comm/history.h"
#include "core/comm/nccl/cuda_util.h"
#include "core/comm/process_group.h"

namespace mddp::comm::nccl {

// What the group and its Works share: the communicator, the first error and
// the streams. See Note [One failure ends the communicator] in
// core/comm/communicator.cc: the GPU path keeps the same rule, and its
// teardown is ncclCommAbort. A Work may outlive its group (a caller keeps
// the handle), so the streams live here, destroyed with the last holder:
// a Work never frees memory on a destroyed stream.
struct GroupState {
  GroupState() = default;
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;
  ~GroupState();  // destroys the streams

  Where where;
  int size = 0;
  std::chrono::milliseconds timeout{0};
  // Guards comm and first_error. Every NCCL call on comm is made under it,
  // because ncclCommAbort (from any thread, e.g. the heartbeat's) frees comm.
  std::mutex mu;
  ncclComm_t comm = nullptr;  // null once aborted or destroyed
  std::exception_ptr first_error;
  // Issued at issue; started and finished (event times) when a Work is waited for.
  detail::History history;
  // NCCL's INFO log when microddp captured it (transport_log.h), else "".
  std::string nccl_log;
  std::once_flag transport_logged;
  // The collectives' stream, and an idle one for clock anchors and for
  // copying staged results home; created by the group.
  cudaStream_t comm_stream = nullptr, aux_stream = nullptr;

  // Records the first error and aborts the communicator. Call with mu held.
  void fail_locked(std::exception_ptr error);
  void fail(std::exception_ptr error);
  // Null while healthy. Otherwise the first error — which may be NCCL's
  // asynchronous error, found now (it then fails the group).
  std::exception_ptr check();
  // After a call returned ncclInProgress (nonblocking communicator): polls
  // ncclCommGetAsyncError until NCCL finished the call, failing the group on
  // an error or after the timeout (`what` names the call in the message).
  // Call with `lock` (on mu) held; it is released while sleeping.
  void await_call(std::unique_lock<std::mutex>& lock, const std::string& what);
  // Once, after the first collective completed (NCCL connects lazily): one
  // line naming the transport NCCL chose, read from its captured log.
  void log_transport_once();
};

// One collective on the communication stream: three events (`ready` on the
// compute stream, `start` and `end` on the communication stream) and, for
// host buffers, the device copy the result comes back from.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<GroupState> state, std::shared_ptr<const ClockAnchor> anchor,
           uint64_t seq, std::string label);
  ~NcclWork() override;
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // Polls `end` and NCCL's asynchronous error until the collective finished,
  // the group failed or the timeout passed (then aborts the group); copies a
  // staged result back to the host. Throws the group's error whenever the
  // group failed before the collective was seen complete: an aborted
  // collective's kernel exits early and its `end` event completes too, so
  // completion alone does not mean success. Thread-safe, callable repeatedly.
  void wait() override;
  bool completed() const override;
  int64_t start_ns() const override { return start_ns_.load(std::memory_order_acquire); }
  int64_t end_ns() const override { return end_ns_.load(std::memory_order_acquire); }
  int64_t ready_ns() const override { return ready_ns_.load(std::memory_order_acquire); }

  cudaEvent_t ready = nullptr, start = nullptr, end = nullptr;
  // Host-buffer staging: `staged` was allocated on the comm stream; once the
  // collective is complete its result is copied from `staged + staged_offset`
  // to `host_out` (staged_bytes) on the idle aux stream, then freed there.
  void* staged = nullptr;
  std::size_t staged_offset = 0, staged_bytes = 0;
  void* host_out = nullptr;

 private:
  void finish();
  [[noreturn]] void fail(std::exception_ptr error);

  std::shared_ptr<GroupState> state_;
  std::shared_ptr<const ClockAnchor> anchor_;
  uint64_t seq_;
  std::string label_;
  mutable std::mutex mu_;
  bool done_ = false;
  std::exception_ptr error_;
  std::atomic<int64_t> start_ns_{0}, end_ns_{0}, ready_ns_{0};
};

}  // namespace mddp::comm::nccl
