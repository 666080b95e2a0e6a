// connect(): the topology, the transport's rendezvous, then a Communicator over it.
#include "core/comm/transport/connect.h"

#include <spdlog/spdlog.h>

#include "core/comm/communicator.h"
#include "core/comm/transport/shm/shm_transport.h"

namespace mddp::comm {

std::unique_ptr<Communicator> connect(Store& store, int rank, int size, const JobIdentity& job,
                                      TransportKind kind, CommOptions options,
                                      const std::string& bind_host, const std::string& prefix) {
  return connect_as_host(store, rank, size, job, kind, options, host_identity(), bind_host, prefix);
}

std::unique_ptr<Communicator> connect_as_host(Store& store, int rank, int size,
                                              const JobIdentity& job, TransportKind kind,
                                              CommOptions options, const std::string& host_id,
                                              const std::string& bind_host,
                                              const std::string& prefix) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
  const Deadline deadline = Clock::now() + options.timeout;
  const auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds(1));
  };
  HostTopology topology = exchange_topology(store, rank, size, host_id, deadline, prefix);
  if (kind == TransportKind::kAuto)
    kind = topology.single_host() ? TransportKind::kShm : TransportKind::kTcp;
  auto transport = connect_transport(store, rank, size, job, kind, left(), bind_host, prefix,
                                     options.setup_abort);
  if (options.slow_peer >= 0)
    transport->limit_send_rate(options.slow_peer, options.slow_peer_bytes_per_second);
  // The hierarchical all-reduce's level within the host: its ranks meet
  // under a prefix of their own (one per host) over shared memory.
  std::unique_ptr<Transport> host;
  const bool may_use =
      options.algorithm == Algorithm::kAuto || options.algorithm == Algorithm::kHierarchical;
  const int h = topology.host_of(rank);
  if (may_use && !topology.single_host() && topology.local_size(rank) > 1) {
    host = ShmTransport::connect(store, topology.local_rank(rank), topology.local_size(rank), job,
                                 left(), str(prefix, "/local", h));
  }
  if (topology.multi_host_multi_rank())
    spdlog::info("data plane: {} over {}{}", topology.describe(), transport->name(),
                 host ? ", shared memory within each host (the hierarchical all-reduce)" : "");
  return std::make_unique<Communicator>(std::move(transport), options, std::move(topology),
                                        std::move(host));
}

}  // namespace mddp::comm
