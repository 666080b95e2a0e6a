// connect_transport: the one entry point that builds this rank's Transport.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/comm/store.h"
#include "core/comm/transport.h"
#include "core/comm/transport/abort_signal.h"
#include "core/comm/types.h"

namespace mddp::comm {

// Collective: every rank of the job calls it with the same store, size, job,
// kind and prefix. Blocks until this rank is connected to every peer, or
// throws TimeoutError naming the missing ranks after `timeout`.
//
// kAuto picks shm when every rank published the same host identity
// (hostname + boot id) under "<prefix>/host/<rank>" (exchange_topology in
// ../topology.h), else tcp; all ranks read the same values, so they all
// pick the same kind. bind_host is the
// address the TCP listener binds to and publishes (unused by shm). World
// size 1 gives a transport with no peers. `abort` (optional) ends the TCP
// mesh's set-up at once with AbortedError once aborted (tcp/mesh.h).
std::unique_ptr<Transport> connect_transport(Store& store, int rank, int size,
                                             const JobIdentity& job, TransportKind kind,
                                             std::chrono::milliseconds timeout,
                                             const std::string& bind_host = "127.0.0.1",
                                             const std::string& prefix = "comm",
                                             const AbortSignal* abort = nullptr);

// Identity of this machine, equal for processes that can share memory:
// hostname and kernel boot id.
std::string host_identity();

}  // namespace mddp::comm
