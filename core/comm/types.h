// Vocabulary shared by the comm layer: element types, reduction ops,
// algorithms and the errors a collective can end with.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/common/check.h"

namespace mddp::comm {

// 16-bit types travel as 16 bits and are accumulated in fp32.
enum class DataType { kFloat32, kFloat16, kBFloat16 };
enum class ReduceOp { kSum, kAvg, kMax, kMin };
// kDoubling: recursive doubling (algorithms/doubling_all_reduce.cc);
// kHierarchical: two levels, within hosts and across them
// (algorithms/hierarchical_all_reduce.cc); all_reduce only.
enum class Algorithm { kAuto, kRing, kNaive, kTree, kDoubling, kHierarchical };
enum class TransportKind { kAuto, kTcp, kShm };

std::size_t element_size(DataType t);
const char* to_string(DataType t);
const char* to_string(ReduceOp op);
const char* to_string(Algorithm a);
const char* to_string(TransportKind k);
// Parse the command-line spellings (fp32|fp16|bf16, sum|avg|max|min,
// auto|ring|naive|tree|doubling|hierarchical, auto|tcp|shm); throw InputError listing the choices.
DataType parse_dtype(const std::string& s);
ReduceOp parse_reduce_op(const std::string& s);
Algorithm parse_algorithm(const std::string& s);
TransportKind parse_transport(const std::string& s);

// Who may take part in this data plane: the ranks of one attempt of one
// job. The handshakes prove knowledge of `key` (HMAC, never the key itself;
// tcp/handshake.h, shm/segment.h), so a stranger, another job's rank or a
// rank of an earlier attempt is refused before any collective byte. A
// worker derives the key from the job token and the attempt's nonce
// (control/proof.h: the token never reaches the data plane); local
// tools (bench, demos) may use any shared secret, "" included.
struct JobIdentity {
  std::string job_id = "local";
  int attempt = 0;
  std::string key;  // secret shared by the attempt's ranks
};

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A collective or transport operation failed. what() names this rank, the
// peer, the collective and its sequence number where known.
class CommError : public Error {
 public:
  using Error::Error;
};
// A wait ran past its deadline (a peer is slow, stopped or dead).
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};
// abort() was called (e.g. the coordinator reported another rank dead).
class AbortedError : public CommError {
 public:
  using CommError::CommError;
};
// What a transport saw of a peer whose connection failed: the evidence the
// coordinator weighs to tell a dead process from a broken network link.
enum class PeerFault {
  kUnknown,  // an invalid frame, a failed handshake: neither death nor a cut link
  kClosed,  // the peer closed its end (TCP EOF, shm closed flag): it exited or closed its transport
  kReset,   // the connection broke (reset, aborted, broken pipe): the peer died, or the network
            // failed
  kDied,    // the peer's process is gone, seen directly (same host: its pid has exited)
};
const char* to_string(PeerFault f);  // "unknown", "closed", "reset", "died"

// A peer closed its connection, the connection broke, the peer's process
// died, or it sent an invalid frame or failed the handshake. peer() is the
// other rank (-1: not known) and fault() what was seen of it.
class PeerError : public CommError {
 public:
  explicit PeerError(const std::string& message, int peer = -1,
                     PeerFault fault = PeerFault::kUnknown)
      : CommError(message), peer_(peer), fault_(fault) {}
  int peer() const { return peer_; }
  PeerFault fault() const { return fault_; }

 private:
  int peer_;
  PeerFault fault_;
};

}  // namespace mddp::comm
