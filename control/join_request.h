// What a worker says of itself: its Join (the protocol version it speaks,
// protocol_version.h; its host, address, device, requested rank and the
// proof of the token) and, once it resolved the job's config, the
// resources it runs on (sent in its heartbeats). Read from the wire by control/wire.h on the
// coordinator's side (coordinator/admission.h, rendezvous.h), written by
// the worker (worker/coordinator_client.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "control/protocol_version.h"

namespace mddp::control {

struct JoinRequest {
  std::string job_id;
  uint32_t protocol_version = 0;
  std::string host, data_addr, device;
  int requested_rank = -1;  // < 0: any
  int64_t pid = 0;
  // The proof of the token (control/proof.h; checked by coordinator/admission.h): raw bytes.
  std::string client_nonce, server_nonce, proof;
  std::string peer;  // the caller's address as the server saw it, for the log ("" unknown)
  // It holds its trainer already: a survivor, or a newcomer that prepared
  // (Note [Healing] in coordinator/job.cc).
  bool ready = false;
};

// Longer device names than this are not recorded ("cuda:15" is 7).
inline constexpr std::size_t kMaxDeviceName = 64;

// What a rank reports it runs on once it has resolved the job's config
// (proto Resources, sent in its heartbeats).
struct Resources {
  std::string device;  // "cpu", "cuda:1": the job's "cuda" resolved by the worker
  int threads = 0;     // compute threads (--threads); 0: unknown
  int cpus = 0;        // CPUs its process may run on; 0: unknown

  bool operator==(const Resources&) const = default;
};

}  // namespace mddp::control
