// The gloo process group (gloo.h): set-up, the collectives, errors, abort.
//
// Note [Aborting gloo]
// ~~~~~~~~~~~~~~~~~~~~
// ProcessGroup::abort must end a collective that is blocked waiting for a
// peer. gloo 0.5 (Debian 12's libgloo, git 2022-05-18) has one public way
// in: transport::Pair::close() on every pair, which closes the sockets.
// Peers blocked on this rank see its connections close and fail at once
// with PeerError; this rank's own blocked collective is not always woken by
// gloo (a send waiting for a peer's go-ahead waits on its own condition
// until gloo's per-operation timeout, --comm-timeout-ms). gloo's internal
// tcp::Pair::signalExceptionExternal would wake it at once, but Debian's
// libgloo-dev cannot compile its header (gloo/transport/tcp/pair.h includes
// gloo/common/memory.h, which the package does not ship), and a copy of a
// gloo header is not ours to keep. So abort() does not wait for gloo: the
// running collective is abandoned (ProgressQueue::abandon), its waiter gets
// AbortedError with the reason at once, and the progress thread is left in
// gloo; when the group goes, it is destroyed if that thread came out within
// a grace period, else kept for good, as after its device thread died. (A
// survivor of a kill -9 once sat in such a send for the whole timeout after
// the job had failed: 1 run in about 20 of fault.kill9_gloo_rank* on a
// loaded machine.)
//
// Note [Naming gloo's peers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// gloo's I/O errors name the peer only by its listening address
// ("Connection closed by peer [10.0.0.3]:47335"), or, on the side that
// accepted the connection, by the peer's ephemeral port. After the mesh is
// up each rank publishes its listening address (its pairs' own, less the
// "$seq" suffix) in the store, so an error can be rewritten to say "rank 2
// at [10.0.0.3]:47335" (by the address, or by the host when one peer alone
// is there) and a PeerError can carry the rank: the worker then reports the broken
// link to the coordinator (ReportPeerFault), as with microddp's transports.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/comm/algorithms/context.h"
#include "core/comm/gloo/device_thread.h"
#include "core/comm/gloo/gloo.h"
#include "core/comm/gloo/gloo_store.h"
#include "core/comm/progress_queue.h"
#include "core/comm/reduce_kernels.h"
#include "core/comm/transport/tcp/socket.h"

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

// The listening address in a gloo Address's str(): "[127.0.0.1]:47335$3" -> "[127.0.0.1]:47335".
std::string listen_address(const ::gloo::transport::Address& a) {
  std::string s = a.str();
  return s.substr(0, s.find('$'));
}

// The rank `what` names: the one whose listening address `addresses[r]`
// occurs in it whole (not as a prefix of a longer port); else, since the
// side of a pair that accepted the connection names the peer by its
// ephemeral port, the one rank whose host ("[10.0.0.3]") occurs in it.
// -1 when neither is unique (several peers on one host).
int rank_named(const std::string& what, const std::vector<std::string>& addresses) {
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    const std::string& a = addresses[r];
    if (a.empty()) continue;
    for (std::size_t at = what.find(a); at != std::string::npos; at = what.find(a, at + 1)) {
      const std::size_t end = at + a.size();
      if (end == what.size() || !std::isdigit(static_cast<unsigned char>(what[end])))
        return static_cast<int>(r);
    }
  }
  int by_host = -1;
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    const std::string& a = addresses[r];
    if (a.empty() || what.find(a.substr(0, a.rfind(':') + 1)) == std::string::npos) continue;
    if (by_host >= 0) return -1;
    by_host = static_cast<int>(r);
  }
  return by_host;
}

// What gloo's error text (strerror's words) says of the connection. An
// aborted socket (ECONNABORTED: cut on this side, by `ss -K` or a firewall)
// is a broken connection like a reset one.
PeerFault fault_of(const std::string& what) {
  if (what.find("closed by peer") != std::string::npos) return PeerFault::kClosed;
  for (const char* broken : {"reset", "Broken pipe", "connection abort"})
    if (what.find(broken) != std::string::npos) return PeerFault::kReset;
  return PeerFault::kUnknown;
}

// Test seam (tests/fault/crash_test.sh gloo_device_thread):
// MDDP_TEST_GLOO_DEVICE_THROW=RANK:SEQ makes rank RANK's device thread throw,
// as gloo's does (Note [gloo's device thread dies]), as its collective #SEQ
// starts. -1 when unset or for another rank.
int64_t device_throw_for_tests(int rank) {
  const char* v = std::getenv("MDDP_TEST_GLOO_DEVICE_THROW");
  int r = -1;
  long long seq = -1;
  if (!v || std::sscanf(v, "%d:%lld", &r, &seq) != 2 || r != rank) return -1;
  return seq;
}

class GlooGroup final : public ProcessGroup {
 public:
  // peer_addresses[r]: rank r's listening address (Note [Naming gloo's peers]).
  GlooGroup(std::shared_ptr<::gloo::Context> context,
            std::shared_ptr<::gloo::transport::Device> device,
            std::vector<std::string> peer_addresses, std::chrono::milliseconds timeout)
      : context_(std::move(context)),
        peer_addresses_(std::move(peer_addresses)),
        timeout_(timeout),
        queue_(context_->rank, timeout, [this](const std::string& reason) { stop(reason); }),
        device_thread_(
            std::move(device), [this](std::exception_ptr e) { device_thread_died(e); }, timeout),
        throw_at_(device_throw_for_tests(context_->rank)) {}

  // Note [gloo's device thread dies]: then this group is never destroyed.
  // Whether the group must never be destroyed: its device thread died, or
  // an abandoned collective's thread is still inside gloo after a grace
  // period (Note [Aborting gloo]): destroying the context would join it.
  bool keep_for_good() const { return device_dead_.load() || !queue_.settled(kAbandonGrace); }

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
  WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                         ReduceOp op) override {
    check(in, count, "reduce_scatter");
    check(out, count, "reduce_scatter");
    return submit(
        "reduce_scatter(gloo all_reduce)", bytes_of(count * size(), dtype),
        [=, this](uint32_t tag) {
          if (count == 0) return;  // (no buffers: null pointers may come)
          const std::size_t block = bytes_of(count, dtype);
          std::vector<std::byte> whole(
              static_cast<const std::byte*>(in),
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
    return submit(str("broadcast(root ", root, ")"), bytes_of(count, dtype),
                  [=, this](uint32_t tag) {
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

  // See Note [Aborting gloo].
  void abort(const std::string& reason) override {
    queue_.abort(reason);
    queue_.abandon(
        std::make_exception_ptr(AbortedError(str("rank ", rank(), ": aborted: ", abort_reason()))));
  }
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
      if (tag + 1 == throw_at_) throw_on_device_thread();
      try {
        run(tag);
      } catch (const ::gloo::Exception& e) {
        rethrow_as_comm_error(e);
      }
    });
  }

  // On the dying device thread: See Note [gloo's device thread dies].
  void device_thread_died(std::exception_ptr e) {
    device_dead_ = true;
    std::exception_ptr error;
    try {
      try {
        std::rethrow_exception(e);
      } catch (const ::gloo::Exception& ge) {
        rethrow_as_comm_error(ge, "its device thread ended: ");
      } catch (const std::exception& se) {
        throw CommError(str("rank ", rank(), ": gloo: its device thread ended: ", se.what()));
      }
    } catch (...) {
      error = std::current_exception();
    }
    queue_.abandon(error);
  }

  // The seam's throw: what gloo says of a write to the next rank that failed.
  void throw_on_device_thread() {
    const std::string& peer = peer_addresses_[static_cast<std::size_t>((rank() + 1) % size())];
    device_thread_.throw_for_test(
        str("[gloo/transport/tcp/pair.cc] writev ", peer,
            ": Software caused connection abort (MDDP_TEST_GLOO_DEVICE_THROW)"));
  }

  // `where`: said before gloo's words.
  [[noreturn]] void rethrow_as_comm_error(const ::gloo::Exception& e,
                                          const char* where = "") const {
    if (aborted_.load()) throw AbortedError(str("rank ", rank(), ": aborted: ", abort_reason()));
    const std::string gloo_says = str(where, e.what());
    const int peer = rank_named(gloo_says, peer_addresses_);
    const std::string what = peer < 0 ? str("rank ", rank(), ": gloo: ", gloo_says)
                                      : str("rank ", rank(), ": gloo, with rank ", peer, " at ",
                                            peer_addresses_[peer], ": ", gloo_says);
    if (gloo_says.find("Timed out") != std::string::npos ||
        gloo_says.find("timeout") != std::string::npos)
      throw TimeoutError(what);
    if (dynamic_cast<const ::gloo::IoException*>(&e))
      throw PeerError(what, peer, fault_of(gloo_says));
    throw CommError(what);
  }

  std::string abort_reason() const {
    std::lock_guard lock(mu_);
    return reason_;
  }

  // ProgressQueue's on_failure: See Note [Aborting gloo]. Once the device
  // thread died, gloo is not touched again (Note [gloo's device thread dies]).
  void stop(const std::string& reason) {
    {
      std::lock_guard lock(mu_);
      if (aborted_.exchange(true)) return;
      reason_ = reason;
    }
    if (device_dead_.load()) return;
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      if (auto& pair = context_->getPair(peer)) pair->close();
    }
  }

  // How long a dying group waits for an abandoned collective to come out of gloo.
  static constexpr std::chrono::milliseconds kAbandonGrace{2000};

  std::shared_ptr<::gloo::Context> context_;
  std::vector<std::string> peer_addresses_;
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;  // training thread only (collectives are issued from one thread)
  mutable std::mutex mu_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> device_dead_{false};  // See Note [gloo's device thread dies]
  std::string reason_;
  detail::ProgressQueue queue_;  // destroyed before the above: its thread uses them
  DeviceThread device_thread_;   // destroyed first: it calls into the queue
  const int64_t throw_at_;       // the test seam's collective, from 1; -1: none
};

// What connect_gloo returns: the group, destroyed with it unless a thread is
// left inside gloo for good — its device thread died (Note [gloo's device
// thread dies]), or an abandoned collective has not come out (Note
// [Aborting gloo]): then the group is kept, never destroyed.
class KeptWhileInGloo final : public ProcessGroup {
 public:
  explicit KeptWhileInGloo(std::unique_ptr<GlooGroup> group) : group_(std::move(group)) {}
  ~KeptWhileInGloo() override {
    if (group_->keep_for_good()) {
      static auto* kept = new std::vector<std::unique_ptr<GlooGroup>>();  // never destroyed
      static std::mutex mu;
      std::lock_guard lock(mu);
      kept->push_back(std::move(group_));
    }
  }

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  std::string transport_name() const override { return group_->transport_name(); }
  WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) override {
    return group_->all_reduce(data, count, dtype, op);
  }
  WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                         ReduceOp op) override {
    return group_->reduce_scatter(in, out, count, dtype, op);
  }
  WorkPtr all_gather(const void* in, void* out, int64_t count, DataType dtype) override {
    return group_->all_gather(in, out, count, dtype);
  }
  WorkPtr broadcast(void* data, int64_t count, DataType dtype, int root) override {
    return group_->broadcast(data, count, dtype, root);
  }
  WorkPtr barrier() override { return group_->barrier(); }
  void abort(const std::string& reason) override { group_->abort(reason); }
  std::vector<CollectiveRecord> history() const override { return group_->history(); }

 private:
  std::unique_ptr<GlooGroup> group_;
};

}  // namespace

std::string gloo_version() {
  return str("gloo ", GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".", GLOO_VERSION_PATCH);
}

std::unique_ptr<ProcessGroup> connect_gloo(Store& store, int rank, int size,
                                           const GlooOptions& options) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
  // gloo's TCP pairs write without MSG_NOSIGNAL: a write to a connection the
  // peer reset would raise SIGPIPE and end this process without a word (seen
  // as "rank N died" when a link was cut). Ignored, the write fails with
  // EPIPE and gloo throws an IoException ("Broken pipe"), reported below.
  ::signal(SIGPIPE, SIG_IGN);
  // Debian's gloo resolves the address without checking getaddrinfo's
  // result: a name that does not resolve crashed the process (SIGSEGV in
  // CreateDeviceAttr) where an error was meant. Resolve it here first.
  try {
    tcp::resolve(options.bind_host, 0, true);
  } catch (const CommError& e) {
    throw InputError(
        str("gloo cannot use the data-plane address ", options.bind_host, ": ", e.what()));
  }
  ::gloo::transport::tcp::attr attr;
  attr.hostname = options.bind_host;
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception&
               e) {  // gloo::Exception, or GLOO_ENFORCE's EnforceNotMet for an unknown name
    throw InputError(
        str("gloo cannot use the data-plane address ", options.bind_host, ": ", e.what()));
  }
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  StoreAdapter rendezvous(store, options.prefix + "/gloo", options.timeout);
  try {
    context->connectFullMesh(rendezvous, device);
  } catch (const ::gloo::Exception& e) {
    throw PeerError(str("rank ", rank, ": gloo could not connect its full mesh: ", e.what()));
  }
  // Note [Naming gloo's peers]: every pair of a rank listens on one address.
  std::vector<std::string> addresses(static_cast<std::size_t>(size));
  if (size > 1) {
    const std::string key = options.prefix + "/gloo/listen/";
    store.set(key + std::to_string(rank),
              listen_address(context->getPair((rank + 1) % size)->address()));
    for (int r = 0; r < size; ++r)
      if (r != rank)
        addresses[static_cast<std::size_t>(r)] =
            store.get(key + std::to_string(r), options.timeout);
  }
  return std::make_unique<KeptWhileInGloo>(std::make_unique<GlooGroup>(
      std::move(context), std::move(device), std::move(addresses), options.timeout));
}

}  // namespace mddp::comm::gloo
