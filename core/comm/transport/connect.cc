#include "core/comm/transport/connect.h"

#include <unistd.h>

#include <fstream>

#include "core/comm/topology.h"
#include "core/comm/transport/shm/shm_transport.h"
#include "core/comm/transport/tcp/tcp_transport.h"

namespace mddp::comm {

std::string host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return std::string(name) + "/" + boot;
}

std::unique_ptr<Transport> connect_transport(Store& store, int rank, int size,
                                             const JobIdentity& job, TransportKind kind,
                                             std::chrono::milliseconds timeout,
                                             const std::string& bind_host,
                                             const std::string& prefix, const AbortSignal* abort) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
  const Deadline deadline = Clock::now() + timeout;
  if (kind == TransportKind::kAuto)
    kind = exchange_topology(store, rank, size, host_identity(), deadline, prefix).single_host()
               ? TransportKind::kShm
               : TransportKind::kTcp;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  switch (kind) {
    case TransportKind::kShm:
      return ShmTransport::connect(store, rank, size, job, left, prefix);
    case TransportKind::kTcp:
    case TransportKind::kAuto:
      return TcpTransport::connect(store, rank, size, job, left, bind_host, prefix, abort);
  }
  return nullptr;
}

}  // namespace mddp::comm
