// Which process owns a shared-memory segment, in terms that survive pid
// reuse and tell pid namespaces apart, so a peer (or a later job on the
// host) can tell whether the owner still runs.
#pragma once

#include <cstdint>

namespace mddp::comm::shm {

struct ProcessId {
  uint64_t pid_ns = 0;  // inode of /proc/self/ns/pid (0: unknown)
  int32_t pid = 0;
  uint64_t start_ticks =
      0;  // start time, clock ticks after boot (/proc/PID/stat field 22; 0: unknown)
};

// This process.
ProcessId self_process_id();

enum class Liveness {
  kAlive,    // that very process still runs (not a zombie)
  kGone,     // it exited (or is a zombie), or its pid now names another process
  kUnknown,  // another pid namespace, or no /proc: this process cannot tell
};
Liveness liveness(const ProcessId& p);

}  // namespace mddp::comm::shm
