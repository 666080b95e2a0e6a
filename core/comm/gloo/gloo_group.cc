// The gloo process group (gloo.h): set-up, the collectives, errors, abort.
//
// Note [Aborting gloo]
// ~~~~~~~~~~~~~~~~~~~~
// ProcessGroup::abort must end a collective that is blocked waiting for a
// peer. gloo 0.5 (Debian 12's libgloo, git 2022-05-18) has one public way
// in: transport::Pair::close() on every pair, which closes the sockets.
// Peers blocked on this rank see its connections close and fail at once
// with PeerError; this rank's own blocked collective is not woken by gloo
// (its buffers wait on their own condition until gloo's per-operation
// timeout) and then reports AbortedError with the reason. gloo's internal
// tcp::Pair::signalExceptionExternal would wake it at once, but Debian's
// libgloo-dev cannot compile its header (gloo/transport/tcp/pair.h includes
// gloo/common/memory.h, which the package does not ship), and a copy of a
// gloo header is not ours to keep.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/comm/algorithms/context.h"
#include "core/comm/gloo/gloo.h"
#include "core/comm/gloo/gloo_store.h"
#include "core/comm/progress_queue.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm::gloo {
namespace {

// gloo's element-wise function for (type, op): its own for fp32, microddp's
// (fp32 accumulation, one rounding) for the 16-bit types gloo lacks or
// rounds differently.
::gloo::AllreduceOptions::Func reduce_function(DataType t, ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  const ReduceOp c = combine_op(op);
  if (t == DataType::kFloat32) {
    const Fn fn = c == ReduceOp::kMax   ? Fn{&::gloo::max<float>}
                  : c == ReduceOp::kMin ? Fn{&::gloo::min<float>}
                                        : Fn{&::gloo::sum<float>};
    return fn;
  }
  return [t, c](void* out, const void* a, const void* b, size_t n) { reduce(out, a, b, n, t, c); };
}

PeerFault fault_of(const std::string& what) {
  if (what.find("closed by peer") != std::string::npos) return PeerFault::kClosed;
  if (what.find("reset") != std::string::npos || what.find("Broken pipe") != std::string::npos)
    return PeerFault::kReset;
  return PeerFault::kUnknown;
}

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<::gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)),
        timeout_(timeout),
        queue_(context_->rank, timeout, [this](const std::string& reason) { stop(reason); }) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string transport_name() const override { return gloo_version() + " tcp"; }

  WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    check(data, count, "all_reduce");
    return submit("all_reduce(gloo ring)", bytes_of(count, dtype), [=, this](uint32_t tag) {
      run_all_reduce(data, count, dtype, op, tag);
      finish_avg(data, count, dtype, op);
    });
  }

  // Gloo's options API has no reduce-scatter: all-reduce a copy of the
  // whole buffer (this group's own all_reduce, run inline), keep block
  // `rank`. Twice a ring reduce-scatter's bytes; the result is the same.
  WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype, ReduceOp op) override {
    check(in, count, "reduce_scatter");
    check(out, count, "reduce_scatter");
    return submit("reduce_scatter(gloo all_reduce)", bytes_of(count * size(), dtype), [=, this](uint32_t tag) {
      const std::size_t block = bytes_of(count, dtype);
      std::vector<std::byte> whole(static_cast<const std::byte*>(in),
                                   static_cast<const std::byte*>(in) + block * static_cast<std::size_t>(size()));
      run_all_reduce(whole.data(), count * size(), dtype, op, tag);
      std::memcpy(out, whole.data() + block * static_cast<std::size_t>(rank()), block);
      finish_avg(out, count, dtype, op);
    });
  }

  WorkPtr all_gather(const void* in, void* out, int64_t count, DataType dtype) override {
    check(in, count, "all_gather");
    check(out, count, "all_gather");
    return submit("all_gather(gloo)", bytes_of(count * size(), dtype), [=, this](uint32_t tag) {
      if (count == 0) return;
      const std::size_t es = element_size(dtype);
      if (size() == 1) {
        if (in != out) std::memmove(out, in, static_cast<std::size_t>(count) * es);
        return;
      }
      ::gloo::AllgatherOptions o(context_);
      const std::size_t block = static_cast<std::size_t>(count) * es;
      auto* own_block = static_cast<uint8_t*>(out) + static_cast<std::size_t>(rank()) * block;
      // No input: gloo's in-place form, which finds this rank's block already in the output.
      if (in != own_block) o.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), block);
      o.setOutput(static_cast<uint8_t*>(out), static_cast<std::size_t>(count * size()) * es);
      o.setTag(tag);
      o.setTimeout(timeout_);
      ::gloo::allgather(o);
    });
  }

  WorkPtr broadcast(void* data, int64_t count, DataType dtype, int root) override {
    check(data, count, "broadcast");
    MDDP_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank of ", size());
    return submit(str("broadcast(root ", root, ")"), bytes_of(count, dtype), [=, this](uint32_t tag) {
      if (count == 0 || size() == 1) return;
      ::gloo::BroadcastOptions o(context_);
      o.setOutput(static_cast<uint8_t*>(data), bytes_of(count, dtype));
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout_);
      ::gloo::broadcast(o);
    });
  }

  WorkPtr barrier() override {
    return submit("barrier", 0, [this](uint32_t tag) {
      if (size() == 1) return;
      ::gloo::BarrierOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout_);
      ::gloo::barrier(o);
    });
  }

  void abort(const std::string& reason) override { queue_.abort(reason); }
  std::vector<CollectiveRecord> history() const override { return queue_.history(); }

 private:
  // gloo's ring all-reduce of data[count], in place, on the progress thread
  // (kAvg: still the sum; finish_avg divides).
  void run_all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op, uint32_t tag) {
    if (count == 0 || size() == 1) return;
    ::gloo::AllreduceOptions o(context_);
    if (dtype == DataType::kFloat32)
      o.setOutput(static_cast<float*>(data), static_cast<std::size_t>(count));
    else  // 16 bits: gloo moves them as opaque elements, reduce_function combines them
      o.setOutput(static_cast<uint16_t*>(data), static_cast<std::size_t>(count));
    o.setReduceFunction(reduce_function(dtype, op));
    o.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(tag);
    o.setTimeout(timeout_);
    ::gloo::allreduce(o);
  }

  void finish_avg(void* data, int64_t count, DataType t, ReduceOp op) const {
    if (op == ReduceOp::kAvg && count > 0)
      divide(data, static_cast<std::size_t>(count), t, static_cast<float>(size()));
  }

  static void check(const void* p, int64_t count, const char* what) {
    MDDP_CHECK(count >= 0, what, ": negative count ", count);
    MDDP_CHECK(count == 0 || p != nullptr, what, ": null buffer for ", count, " elements");
  }

  // Runs `run(tag)` on the progress thread with gloo's exceptions turned into
  // microddp's. Every rank issues the same collectives in the same order, so
  // a counter is a tag every rank agrees on.
  WorkPtr submit(std::string op, std::size_t bytes, std::function<void(uint32_t tag)> run) {
    const uint32_t tag = next_tag_++;
    return queue_.submit(std::move(op), bytes, [this, tag, run = std::move(run)](StepTrace&) {
      try {
        run(tag);
      } catch (const ::gloo::Exception& e) {
        rethrow_as_comm_error(e);
      }
    });
  }

  [[noreturn]] void rethrow_as_comm_error(const ::gloo::Exception& e) const {
    const std::string what = str("rank ", rank(), ": gloo: ", e.what());
    if (aborted_.load()) throw AbortedError(str("rank ", rank(), ": aborted: ", abort_reason()));
    if (what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos)
      throw TimeoutError(what);
    if (dynamic_cast<const ::gloo::IoException*>(&e)) throw PeerError(what, -1, fault_of(what));
    throw CommError(what);
  }

  std::string abort_reason() const {
    std::lock_guard lock(mu_);
    return reason_;
  }

  // ProgressQueue's on_failure: See Note [Aborting gloo].
  void stop(const std::string& reason) {
    {
      std::lock_guard lock(mu_);
      if (aborted_.exchange(true)) return;
      reason_ = reason;
    }
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      if (auto& pair = context_->getPair(peer)) pair->close();
    }
  }

  std::shared_ptr<::gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;  // training thread only (collectives are issued from one thread)
  mutable std::mutex mu_;
  std::atomic<bool> aborted_{false};
  std::string reason_;
  detail::ProgressQueue queue_;  // last: destroyed first, its thread uses the above
};

}  // namespace

std::string gloo_version() {
  return str("gloo ", GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".", GLOO_VERSION_PATCH);
}

std::unique_ptr<ProcessGroup> connect_gloo(Store& store, int rank, int size, const GlooOptions& options) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
  ::gloo::transport::tcp::attr attr;
  attr.hostname = options.bind_host;
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {  // gloo::Exception, or GLOO_ENFORCE's EnforceNotMet for an unknown name
    throw InputError(str("gloo cannot use the data-plane address ", options.bind_host, ": ", e.what()));
  }
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  StoreAdapter rendezvous(store, options.prefix + "/gloo", options.timeout);
  try {
    context->connectFullMesh(rendezvous, device);
  } catch (const ::gloo::Exception& e) {
    throw PeerError(str("rank ", rank, ": gloo could not connect its full mesh: ", e.what()));
  }
  return std::make_unique<GlooGroup>(std::move(context), options.timeout);
}

}  // namespace mddp::comm::gloo
