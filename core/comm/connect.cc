// connect(): the transport's rendezvous, then a Communicator over it.
#include "core/comm/transport/connect.h"

#include "core/comm/communicator.h"

namespace mddp::comm {

std::unique_ptr<Communicator> connect(Store& store, int rank, int size, const JobIdentity& job,
                                      TransportKind kind, CommOptions options,
                                      const std::string& bind_host, const std::string& prefix) {
  auto transport =
      connect_transport(store, rank, size, job, kind, options.timeout, bind_host, prefix);
  return std::make_unique<Communicator>(std::move(transport), options);
}

}  // namespace mddp::comm
