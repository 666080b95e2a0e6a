#include "core/comm/nccl/nccl_work.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <thread>

#include "core/comm/failure.h"
#include "core/comm/nccl/nccl_library.h"
#include "core/comm/nccl/transport_log.h"
#include "core/common/timer.h"
#include "core/tensor/cuda/context.h"

namespace mddp::comm::nccl {
namespace {

using namespace std::chrono_literals;

// Waits spin for the first 200 us (a bucket's all-reduce often ends within
// that, and the exposed-communication time should not include a sleep), then
// sleep 50 us between polls: a poll is one cudaEventQuery and, while not
// done, one ncclCommGetAsyncError.
void back_off(Clock::time_point since) {
  if (Clock::now() - since < 200us)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(50us);
}

}  // namespace

GroupState::~GroupState() {
  if (aux_stream) cudaStreamDestroy(aux_stream);
  if (comm_stream) cudaStreamDestroy(comm_stream);
}

void GroupState::fail_locked(std::exception_ptr error) {
  if (!first_error) first_error = error;
  if (comm) {
    nccl_library().comm_abort(
        comm);  // its own result is of no use: the communicator is gone either way
    comm = nullptr;
  }
}

void GroupState::fail(std::exception_ptr error) {
  std::lock_guard lock(mu);
  fail_locked(error);
}

void GroupState::log_transport_once() {
  std::call_once(transport_logged, [&] {
    if (nccl_log.empty()) return;  // the user set NCCL_DEBUG: NCCL's own log says it
    std::ifstream in(nccl_log);
    const std::string via = summarize_nccl_transports(in);
    spdlog::info("NCCL transport between the ranks: {} (NCCL's log: {})",
                 !via.empty() ? via
                 : size == 1  ? "none (one rank)"
                              : "not named in NCCL's log",
                 nccl_log);
  });
}

std::exception_ptr GroupState::check() {
  std::lock_guard lock(mu);
  if (first_error || !comm) return first_error;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = nccl_library().comm_get_async_error(comm, &async);
  if (r != ncclSuccess)
    fail_locked(nccl_error(r, "ncclCommGetAsyncError", comm, where));
  else if (async != ncclSuccess && async != ncclInProgress)
    fail_locked(nccl_error(async, "an NCCL operation (asynchronous error)", comm, where));
  return first_error;
}

void GroupState::await_call(std::unique_lock<std::mutex>& lock, const std::string& what) {
  const auto since = Clock::now();
  for (;;) {
    if (first_error) std::rethrow_exception(first_error);
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = nccl_library().comm_get_async_error(comm, &async);
    if (r != ncclSuccess) async = r;
    if (async == ncclSuccess) return;
    if (async != ncclInProgress) {
      fail_locked(nccl_error(async, what, comm, where));
      std::rethrow_exception(first_error);
    }
    if (Clock::now() - since > timeout) {
      fail_locked(std::make_exception_ptr(TimeoutError(
          str(where.str(), ": ", what, " did not complete within ", timeout.count(),
              " ms; the NCCL communicator was aborted (a rank died, never started, or cannot reach "
              "the others: NCCL_DEBUG=INFO shows NCCL's view, NCCL_SOCKET_IFNAME picks the "
              "network interface)"))));
      std::rethrow_exception(first_error);
    }
    lock.unlock();
    back_off(since);
    lock.lock();
  }
}

NcclWork::NcclWork(std::shared_ptr<GroupState> state, std::shared_ptr<const ClockAnchor> anchor,
                   uint64_t seq, std::string label)
    : state_(std::move(state)), anchor_(std::move(anchor)), seq_(seq), label_(std::move(label)) {
  for (cudaEvent_t* e : {&ready, &start, &end})
    check_cuda(cudaEventCreate(e), "cudaEventCreate", state_->where);
}

NcclWork::~NcclWork() {
  // A staged buffer of a collective never waited for is freed in stream
  // order, after the collective (an aborted one ends at once).
  if (staged) cudaFreeAsync(staged, state_->comm_stream);
  for (cudaEvent_t e : {ready, start, end}) cudaEventDestroy(e);
}

void NcclWork::fail(std::exception_ptr error) {
  error_ = detail::same_type(error, str(label_, ": ", what_of(error)));
  done_ = true;
  std::rethrow_exception(error_);
}

void NcclWork::wait() {
  std::lock_guard lock(mu_);
  if (done_) {
    if (error_) std::rethrow_exception(error_);
    return;
  }
  const auto since = Clock::now();
  for (bool counted = false;; counted = true) {
    const cudaError_t q = cudaEventQuery(end);
    if (q == cudaSuccess) break;
    if (!counted) tensor::cuda::note_host_wait();  // not done yet: the host waits for the GPU
    if (q != cudaErrorNotReady) state_->fail(cuda_error(q, "cudaEventQuery", state_->where));
    if (std::exception_ptr e = state_->check()) fail(e);
    if (Clock::now() - since > state_->timeout) {
      state_->fail(std::make_exception_ptr(TimeoutError(str(
          label_, ": timed out after ", state_->timeout.count(), " ms on ", state_->where.str(),
          ": a peer is slow, stopped or dead, or the ranks issued different collectives; the NCCL "
          "communicator was aborted\n  hint: raise the timeout only if a step is "
          "legitimately this slow (--comm-timeout-ms); NCCL_DEBUG=INFO shows which peer NCCL waits "
          "for"))));
      fail(state_->check());
    }
    back_off(since);
  }
  // Complete, but an abort also completes it (the kernel exits early): only
  // a group that is still healthy makes the result valid.
  if (std::exception_ptr e = state_->check()) fail(e);
  try {
    finish();
  } catch (const CommError&) {
    fail(std::current_exception());
  }
  state_->log_transport_once();
}

// The collective is complete: bring a staged result home and read the times.
void NcclWork::finish() {
  if (staged) {
    const Where& w = state_->where;
    check_cuda(cudaMemcpyAsync(host_out, static_cast<std::byte*>(staged) + staged_offset,
                               staged_bytes, cudaMemcpyDeviceToHost, state_->aux_stream),
               "cudaMemcpyAsync (staged result to host)", w);
    check_cuda(cudaFreeAsync(staged, state_->aux_stream), "cudaFreeAsync", w);
    staged = nullptr;
    tensor::cuda::note_host_wait();
    check_cuda(cudaStreamSynchronize(state_->aux_stream), "cudaStreamSynchronize", w);
  }
  ready_ns_.store(anchor_->to_ns(ready), std::memory_order_release);
  start_ns_.store(anchor_->to_ns(start), std::memory_order_release);
  end_ns_.store(anchor_->to_ns(end), std::memory_order_release);
  state_->history.started(seq_, start_ns_.load());
  state_->history.finished(seq_, end_ns_.load());
  done_ = true;
}

bool NcclWork::completed() const {
  std::lock_guard lock(mu_);
  return done_ || cudaEventQuery(end) == cudaSuccess || state_->check() != nullptr;
}

}  // namespace mddp::comm::nccl
