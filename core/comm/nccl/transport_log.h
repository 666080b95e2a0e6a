// Which transport NCCL chose between the ranks (P2P over NVLink/PCIe, SHM,
// NET/IB, NET/Socket). NCCL has no API for it; its INFO log names it per
// channel ("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read"). Unless the user
// set NCCL_DEBUG, microddp sends that log to a file of its own and, after a
// group's first collective (NCCL connects lazily), logs one line from it.
// Built without CUDA too, so the parser is tested everywhere.
#pragma once

#include <istream>
#include <string>

namespace mddp::comm::nccl {

// Sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE to
// a file under $TMPDIR (or /tmp) named by the pid, and returns its path;
// returns "" and changes nothing when NCCL_DEBUG is already set (the user's
// own log stands). Only NCCL's first call in the process reads these, so
// call it before that; later calls return the same path.
std::string capture_nccl_log();

// "P2P/CUMEM/read (2), NET/Socket/0 (2); network Socket" from NCCL's INFO
// lines: each transport named after " via " in a "Channel" line, with how
// many channel connections use it, then the network NCCL loaded. "" when no
// line names a transport (one rank, or nothing connected yet).
std::string summarize_nccl_transports(std::istream& log);

}  // namespace mddp::comm::nccl
