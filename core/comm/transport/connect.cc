#include "core/comm/transport/connect.h"

#include <unistd.h>

#include <fstream>

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

namespace {

TransportKind choose(Store& store, int rank, int size, Deadline deadline, const std::string& prefix) {
  const std::string mine = host_identity();
  store.set(str(prefix, "/host/", rank), mine);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::string theirs;
    try {
      theirs = store.get(str(prefix, "/host/", r), std::max(left, std::chrono::milliseconds(0)));
    } catch (const TimeoutError& e) {
      throw TimeoutError(str("rank ", rank, ": rank ", r, " never joined the data plane (", e.what(), ")"));
    }
    if (theirs != mine) return TransportKind::kTcp;
  }
  return TransportKind::kShm;
}

}  // namespace

std::unique_ptr<Transport> connect_transport(Store& store, int rank, int size, const JobIdentity& job,
                                             TransportKind kind, std::chrono::milliseconds timeout,
                                             const std::string& bind_host, const std::string& prefix) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of world size ", size);
  const Deadline deadline = Clock::now() + timeout;
  if (kind == TransportKind::kAuto) kind = choose(store, rank, size, deadline, prefix);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  switch (kind) {
    case TransportKind::kShm:
      return ShmTransport::connect(store, rank, size, job, left, prefix);
    case TransportKind::kTcp:
    case TransportKind::kAuto:
      return TcpTransport::connect(store, rank, size, job, left, bind_host, prefix);
  }
  return nullptr;
}

}  // namespace mddp::comm
