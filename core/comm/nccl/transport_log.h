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

// Call at process start, before the process starts threads of its own
// (setenv races with any thread reading the environment): `microddp`'s
// main() does, and nothing else in microddp sets the environment. (Libraries
// may already run idle pool threads then, OpenBLAS's for one; they do not
// read the environment after their start.) Unless the user set NCCL_DEBUG,
// sets NCCL_DEBUG=INFO,
// NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE=$TMPDIR/microddp-nccl-%p.log
// (NCCL puts the pid in for %p, so child processes that inherit the
// variables each get a file of their own) and MDDP_NCCL_LOG=1, which tells
// a child that the log is microddp's, not the user's. Idempotent.
void capture_nccl_log();

// This process's NCCL log file when microddp captured it, else "" (the
// user's own NCCL_DEBUG stands, or nothing was captured).
std::string nccl_log_path();

// "P2P/CUMEM/read (2), NET/Socket/0 (2); network Socket" from NCCL's INFO
// lines: each transport named after " via " in a "Channel" line, with how
// many channel connections use it, then the network NCCL loaded. "" when no
// line names a transport (one rank, or nothing connected yet).
std::string summarize_nccl_transports(std::istream& log);

}  // namespace mddp::comm::nccl
