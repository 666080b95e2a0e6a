// The pause a spin-wait loop takes between two looks at what it waits for
// (Note [Spin, then sleep]): it tells the core a spin is running, so the
// other hardware thread of the core runs faster and the loop's exit does not
// pay for a mispredicted memory order.
#pragma once

namespace mddp::comm {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace mddp::comm
