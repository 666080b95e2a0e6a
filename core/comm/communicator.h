// The Communicator: collectives over a Transport, executed asynchronously in
// the order they were issued on one progress thread, so the training thread
// can keep computing while they run (this is what lets bucketed DDP overlap
// all-reduce with backward).
//
// Every rank must issue the same collectives in the same order (the sequence
// number of each is printed in errors). Buffers must stay valid and untouched
// until the returned Work completes. Every collective is bounded by
// CommOptions::timeout from the moment it starts running. The first failure
// ends the communicator: every later call fails at once, carrying that first
// error (see Note [One failure ends the communicator] in progress_queue.h).
// The algorithms and their costs: core/comm/algorithms/, docs/allreduce.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/store.h"
#include "core/comm/topology.h"
#include "core/comm/transport.h"
#include "core/comm/transport/abort_signal.h"
#include "core/comm/types.h"

namespace mddp::comm {

struct CommOptions {
  Algorithm algorithm = Algorithm::kAuto;      // all_reduce's default algorithm
  std::chrono::milliseconds timeout{300'000};  // bound on every wait of a collective
  // Watched while the TCP mesh forms (nullptr: none): once aborted, set-up
  // ends at once with AbortedError, as every later wait does on abort().
  const AbortSignal* setup_abort = nullptr;
  // A link slowed on purpose (Transport::limit_send_rate, the slow-link
  // Lab): what this rank sends to slow_peer goes at most this fast. -1: none.
  int slow_peer = -1;
  double slow_peer_bytes_per_second = 0;
};

// The CPU backend of ProcessGroup (process_group.h): buffers are host memory.
class Communicator : public ProcessGroup {
 public:
  // Takes ownership of a connected transport and starts the progress thread.
  // The hierarchical all-reduce also needs the job's `topology` and, where
  // this rank shares a host with others on a multi-host job,
  // `host_transport` among them (numbered by local rank); connect() makes both.
  Communicator(std::unique_ptr<Transport> transport, CommOptions options,
               HostTopology topology = {}, std::unique_ptr<Transport> host_transport = nullptr);
  ~Communicator() override;  // drains nothing: pending work fails with AbortedError
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override;
  int size() const override;
  const CommOptions& options() const;
  std::string transport_name() const override;
  // Which ranks share a host (world_size() 0 when the communicator was made
  // without it).
  const HostTopology& topology() const;

  // In place: data[count] becomes the element-wise reduction over ranks,
  // with CommOptions::algorithm. kAuto: kHierarchical on a job of several
  // hosts with several ranks on one of them (when the topology is known);
  // on one host's shared memory, the direct all-reduce when every rank's
  // buffer came from allocate_shared(); else ring, tree or doubling by size
  // (auto_select.cc) ...
  WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op) override;
  // ... or with `algorithm` (kAuto as above).
  WorkPtr all_reduce(void* data, int64_t count, DataType dtype, ReduceOp op, Algorithm algorithm);
  // Memory in this rank's shared arena when the transport is shm and the
  // all-reduce algorithm auto (process_group.h): an all_reduce of it runs
  // the direct all-reduce when every rank's buffer is such memory.
  std::shared_ptr<void> allocate_shared(std::size_t bytes) override;
  // process_group.h's contract; in place it is the first half of the ring
  // all-reduce (ring_reduce_scatter_inplace).
  WorkPtr reduce_scatter(const void* in, void* out, int64_t count, DataType dtype,
                         ReduceOp op) override;
  // in[count] on every rank; out[count * size] holds rank r's block at r*count.
  WorkPtr all_gather(const void* in, void* out, int64_t count, DataType dtype) override;
  WorkPtr broadcast(void* data, int64_t count, DataType dtype, int root) override;
  // The reduction lands in data on `root`; other ranks' data is left unspecified.
  WorkPtr reduce(void* data, int64_t count, DataType dtype, ReduceOp op, int root);
  // root's in[count * size] -> block r to rank r's out[count] (in ignored elsewhere).
  WorkPtr scatter(const void* in, void* out, int64_t count, DataType dtype, int root);
  // every rank's in[count] -> root's out[count * size] (out ignored elsewhere).
  WorkPtr gather(const void* in, void* out, int64_t count, DataType dtype, int root);
  WorkPtr barrier() override;
  // Point-to-point. A send may block until the peer receives (a transport
  // need not buffer a whole message) and the queue runs in order, so pair
  // them up: in a ring, rank 0 sends first and the others receive first.
  WorkPtr send(const void* data, int64_t count, DataType dtype, int peer);
  WorkPtr recv(void* data, int64_t count, DataType dtype, int peer);

  // Fails every pending and future collective with AbortedError(reason) and
  // unblocks the transport at once. Thread-safe, idempotent.
  void abort(const std::string& reason) override;

  // Called on the progress thread after every step of every later
  // collective with the step and the collective's buffer at that moment
  // (partial results included), e.g. to print a ring all-reduce's partial
  // sums (`microddp demo ring`). Set it before issuing collectives; keep it
  // cheap. The steps alone are in each Work (Work::steps()).
  void set_step_observer(std::function<void(const AlgoStep&, const void* data)> observer);

  // The last collectives, oldest first (what an error message prints).
  std::vector<CollectiveRecord> history() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Collective: exchanges the ranks' host identities (the topology),
// connects this rank's transport (connect_transport in transport/connect.h;
// kAuto: shm on one host, else tcp) and starts a Communicator over it. On a
// job of several hosts where this rank shares its host, with
// options.algorithm auto or hierarchical, it also connects a shared-memory
// transport among the host's ranks for the hierarchical all-reduce.
std::unique_ptr<Communicator> connect(Store& store, int rank, int size, const JobIdentity& job,
                                      TransportKind kind, CommOptions options,
                                      const std::string& bind_host = "127.0.0.1",
                                      const std::string& prefix = "comm");
// The same with this rank's host identity given instead of read from this
// machine (transport/connect.h's host_identity()): tests emulate several
// hosts with the threads of one process.
std::unique_ptr<Communicator> connect_as_host(Store& store, int rank, int size,
                                              const JobIdentity& job, TransportKind kind,
                                              CommOptions options, const std::string& host_id,
                                              const std::string& bind_host = "127.0.0.1",
                                              const std::string& prefix = "comm");

}  // namespace mddp::comm
