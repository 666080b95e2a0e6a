// The control plane's protocol version: a worker and a coordinator of
// different versions refuse each other at Hello and at Join, the message
// naming both (coordinator/admission.h). Bumped with proto/microddp.proto's
// PROTOCOL_VERSION_CURRENT whenever a message or the call sequence changes
// incompatibly.
#pragma once

#include <cstdint>

namespace mddp::control {

// Control-plane protocol version (proto: PROTOCOL_VERSION_CURRENT).
inline constexpr uint32_t kProtocolVersion = 3;

}  // namespace mddp::control
