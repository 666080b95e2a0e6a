// The Communicator: the algorithms (algorithms/) over a Transport, run by a
// ProgressQueue (progress_queue.h: FIFO order on one progress thread, See
// Note [One failure ends the communicator] there).
#include "core/comm/communicator.h"

#include <cstring>
#include <functional>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/progress_queue.h"

namespace mddp::comm {

struct Communicator::Impl {
  std::unique_ptr<Transport> transport;
  CommOptions options;
  HostTopology topology;                      // world_size() 0: not known
  std::unique_ptr<Transport> host_transport;  // among this host's ranks; may be null
  int rank, size;
  Scratch scratch;  // progress thread only
  // Last, so it is destroyed first: its thread uses everything above.
  detail::ProgressQueue queue;

  Impl(std::unique_ptr<Transport> t, CommOptions o, HostTopology topo,
       std::unique_ptr<Transport> host)
      : transport(std::move(t)),
        options(o),
        topology(std::move(topo)),
        host_transport(std::move(host)),
        rank(transport->rank()),
        size(transport->size()),
        queue(rank, options.timeout, [this](const std::string& reason) {
          transport->abort(reason);
          if (host_transport) host_transport->abort(reason);
        }) {}

  // Runs `run` with an AlgoContext over the world's transport.
  WorkPtr submit(std::string op, std::size_t bytes, std::function<void(const AlgoContext&)> run) {
    return queue.submit(std::move(op), bytes, [this, run = std::move(run)](StepTrace& trace) {
      const AlgoContext ctx{*transport, rank,  size, Clock::now() + options.timeout,
                            scratch,    &trace};
      run(ctx);
    });
  }

  // The shared memory an all-reduce asked for with `requested` runs the
  // direct all-reduce on (algorithms/direct_all_reduce.cc): only auto's,
  // on one host's transport (shm), when no algorithm was forced for the job.
  HostSharedMemory* direct(Algorithm requested) const {
    if (requested != Algorithm::kAuto || options.algorithm != Algorithm::kAuto || size == 1)
      return nullptr;
    if (has_levels() && topology.multi_host_multi_rank()) return nullptr;  // hierarchical
    return transport->shared_memory();
  }

  // The hierarchical all-reduce's levels: within a host its own transport,
  // or the world's when the whole job is on one host.
  bool has_levels() const {
    if (topology.world_size() != size) return false;
    return topology.local_size(rank) == 1 || topology.single_host() || host_transport != nullptr;
  }
  HostLevels levels() const {
    Transport* host = host_transport           ? host_transport.get()
                      : topology.single_host() ? transport.get()
                                               : nullptr;
    return HostLevels{topology, host};
  }
};

Communicator::Communicator(std::unique_ptr<Transport> transport, CommOptions options,
                           HostTopology topology, std::unique_ptr<Transport> host_transport) {
  MDDP_CHECK(transport != nullptr);
  MDDP_CHECK(options.timeout.count() > 0, "CommOptions::timeout must be positive");
  MDDP_CHECK(topology.world_size() == 0 || topology.world_size() == transport->size(),
             "topology of ", topology.world_size(), " ranks for a world of ", transport->size());
  impl_ = std::make_unique<Impl>(std::move(transport), options, std::move(topology),
                                 std::move(host_transport));
}

Communicator::~Communicator() = default;

int Communicator::rank() const {
  return impl_->rank;
}
int Communicator::size() const {
  return impl_->size;
}
const CommOptions& Communicator::options() const {
  return impl_->options;
}
std::string Communicator::transport_name() const {
  return impl_->transport->name();
}
const HostTopology& Communicator::topology() const {
  return impl_->topology;
}
std::vector<CollectiveRecord> Communicator::history() const {
  return impl_->queue.history();
}
void Communicator::set_step_observer(
    std::function<void(const AlgoStep&, const void* data)> observer) {
  impl_->queue.set_step_observer(std::move(observer));
}
void Communicator::abort(const std::string& reason) {
  impl_->queue.abort(reason);
}

namespace {
void check_args(const void* p, int64_t count, const char* what) {
  MDDP_CHECK(count >= 0, what, ": negative count ", count);
  MDDP_CHECK(count == 0 || p != nullptr, what, ": null buffer for ", count, " elements");
}
}  // namespace

WorkPtr Communicator::all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) {
  return all_reduce(data, count, dtype, op, Algorithm::kAuto);
}

WorkPtr Communicator::all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op,
                                 Algorithm algorithm) {
  check_args(data, count, "all_reduce");
  const std::size_t bytes = bytes_of(count, dtype);
  const Algorithm requested = algorithm;
  if (algorithm == Algorithm::kAuto) algorithm = impl_->options.algorithm;
  if (algorithm == Algorithm::kAuto)
    algorithm = impl_->has_levels() && impl_->topology.multi_host_multi_rank()
                    ? Algorithm::kHierarchical
                    : choose_all_reduce_algorithm(bytes, size());
  if (algorithm == Algorithm::kHierarchical) {
    MDDP_CHECK(
        impl_->has_levels(), "rank ", rank(),
        ": the hierarchical all-reduce needs the host topology and a transport within the host: "
        "make the communicator with connect() and CommOptions::algorithm auto or hierarchical");
    return impl_->submit("all_reduce(hierarchical)", bytes,
                         [=, levels = impl_->levels()](const AlgoContext& ctx) {
                           all_reduce_hierarchical(ctx, levels, data, count, dtype, op);
                         });
  }
  const AllReduceFn fn = flat_all_reduce(algorithm);
  if (HostSharedMemory* shm = impl_->direct(requested)) {
    // Every rank posts; the direct all-reduce runs where every buffer is shared.
    const bool shared = shm->holds(data, bytes);
    return impl_->submit(
        shared ? std::string("all_reduce(direct)") : str("all_reduce(", to_string(algorithm), ")"),
        bytes, [=](const AlgoContext& ctx) {
          if (!all_reduce_direct(ctx, *shm, data, count, dtype, op))
            fn(ctx, data, count, dtype, op);
        });
  }
  return impl_->submit(str("all_reduce(", to_string(algorithm), ")"), bytes,
                       [=](const AlgoContext& ctx) { fn(ctx, data, count, dtype, op); });
}

std::shared_ptr<void> Communicator::allocate_shared(std::size_t bytes) {
  HostSharedMemory* shm = impl_->direct(Algorithm::kAuto);
  return shm ? shm->allocate(bytes) : nullptr;
}

WorkPtr Communicator::reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                                     ReduceOp op) {
  check_args(in, count, "reduce_scatter");
  check_args(out, count, "reduce_scatter");
  const auto* in_b = static_cast<const std::byte*>(in);
  const auto* out_b = static_cast<const std::byte*>(out);
  const bool in_place = count > 0 && out_b == in_b + bytes_of(count * rank(), dtype);
  MDDP_CHECK(count == 0 || in_place || out_b + bytes_of(count, dtype) <= in_b ||
                 in_b + bytes_of(count * size(), dtype) <= out_b,
             "reduce_scatter: out must be in + rank*count or not overlap in");
  return impl_->submit(
      "reduce_scatter(ring)", bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { reduce_scatter_ring(ctx, in, out, count, dtype, op); });
}

WorkPtr Communicator::all_gather(const void* in, void* out, int64_t count, DataType dtype) {
  check_args(in, count, "all_gather");
  check_args(out, count, "all_gather");
  return impl_->submit(
      "all_gather(ring)", bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { all_gather_ring(ctx, in, out, count, dtype); });
}

namespace {
void check_root(int root, int size, const char* what) {
  MDDP_CHECK(root >= 0 && root < size, what, ": root ", root, " is not a rank of ", size);
}
}  // namespace

WorkPtr Communicator::broadcast(void* data, int64_t count, DataType dtype, int root) {
  check_args(data, count, "broadcast");
  check_root(root, size(), "broadcast");
  return impl_->submit(
      str("broadcast(root ", root, ")"), bytes_of(count, dtype),
      [=](const AlgoContext& ctx) { broadcast_tree(ctx, data, count, dtype, root); });
}

WorkPtr Communicator::reduce(void* data, int64_t count, DataType dtype, ReduceOp op, int root) {
  check_args(data, count, "reduce");
  check_root(root, size(), "reduce");
  return impl_->submit(
      str("reduce(root ", root, ")"), bytes_of(count, dtype),
      [=](const AlgoContext& ctx) { reduce_tree(ctx, data, count, dtype, op, root); });
}

WorkPtr Communicator::scatter(const void* in, void* out, int64_t count, DataType dtype, int root) {
  check_root(root, size(), "scatter");
  if (rank() == root) check_args(in, count, "scatter");
  check_args(out, count, "scatter");
  return impl_->submit(
      str("scatter(root ", root, ")"), bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { scatter_linear(ctx, in, out, count, dtype, root); });
}

WorkPtr Communicator::gather(const void* in, void* out, int64_t count, DataType dtype, int root) {
  check_root(root, size(), "gather");
  check_args(in, count, "gather");
  if (rank() == root) check_args(out, count, "gather");
  return impl_->submit(
      str("gather(root ", root, ")"), bytes_of(count * size(), dtype),
      [=](const AlgoContext& ctx) { gather_linear(ctx, in, out, count, dtype, root); });
}

WorkPtr Communicator::barrier() {
  return impl_->submit("barrier", 0, [](const AlgoContext& ctx) { barrier_dissemination(ctx); });
}

WorkPtr Communicator::send(const void* data, int64_t count, DataType dtype, int peer) {
  check_args(data, count, "send");
  MDDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "send: bad peer ", peer);
  const std::size_t bytes = bytes_of(count, dtype);
  return impl_->submit(str("send(to ", peer, ")"), bytes,
                       [=](const AlgoContext& ctx) { ctx.send(peer, data, bytes); });
}

WorkPtr Communicator::recv(void* data, int64_t count, DataType dtype, int peer) {
  check_args(data, count, "recv");
  MDDP_CHECK(peer >= 0 && peer < size() && peer != rank(), "recv: bad peer ", peer);
  const std::size_t bytes = bytes_of(count, dtype);
  return impl_->submit(str("recv(from ", peer, ")"), bytes,
                       [=](const AlgoContext& ctx) { ctx.recv(peer, data, bytes); });
}

}  // namespace mddp::comm
