// Connecting the full mesh of TCP connections for one job, with the
// handshake of handshake.h on each.
//
// Every rank listens on bind_host:0 and publishes "host:port" under
// "<prefix>/addr/<rank>". Rank i connects to every rank j < i and accepts one
// connection from every rank j > i, so each pair has exactly one connection
// and no two ranks race to connect to each other. Connects, accepts and
// handshakes all progress in one poll loop, so no rank waits on another's
// order; a stranger (garbage, a wrong key, another job, a rank of an
// earlier attempt, silence) is refused and logged with its address while
// the loop goes on accepting the real peers.
#pragma once

#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/transport/abort_signal.h"
#include "core/comm/transport/tcp/socket.h"
#include "core/comm/types.h"

namespace mddp::comm::tcp {

// Returns one connected, handshaken, non-blocking socket per rank (invalid
// for `rank` itself). Throws TimeoutError naming the ranks still missing at
// the deadline, PeerError when a peer refuses us, AbortedError as soon as
// `abort` (optional) is aborted: the job's verdict came (a peer died while
// the mesh was forming), so waiting on for the deadline would be in vain.
std::vector<Fd> connect_mesh(Store& store, int rank, int size, const JobIdentity& job,
                             Deadline deadline, const std::string& bind_host,
                             const std::string& prefix, const AbortSignal* abort = nullptr);

}  // namespace mddp::comm::tcp
