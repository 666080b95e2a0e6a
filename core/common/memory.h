// What this machine can hold: sizes that a flag asks for are checked against
// its physical memory before anything is allocated, so a too-large model or
// dataset is one clear line, not minutes of work ending in the OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace mddp {

// The machine's physical memory in bytes (sysconf), 0 when unknown.
int64_t physical_memory_bytes();

// Throws InputError "<what> needs X GB, more than this machine's Y GB of
// memory" when `bytes` exceeds the physical memory. `what` names the flags.
void require_memory(double bytes, const std::string& what);

}  // namespace mddp
