// The doorbell: how a rank waiting on shared memory sleeps and is woken,
// shared by the rings (shm_transport.cc) and the direct collectives'
// signals (shared_memory.cc). Each rank's segment holds one futex word, its
// doorbell; whoever makes progress possible for the rank rings it.
//
// Note [Doorbell]: a waiter does sleepers++ (seq_cst RMW), v = doorbell,
// re-checks what it waits for (seq_cst loads), then futex_wait(doorbell, v).
// A waker publishes its counter, fences (seq_cst), and if sleepers > 0 bumps
// the doorbell and wakes. Either the waker's fence comes first in the
// seq_cst order, and the waiter's re-check sees the published counter; or
// the waiter's increment comes first, the waker sees sleepers > 0, and its
// bump makes futex_wait return at once (value != v) or wakes it.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

#include "core/comm/transport/shm/segment.h"
#include "core/common/sanitizers.h"  // MDDP_TSAN

namespace mddp::comm::shm {

// A waiting side first spins (kSpin, pause; not at all when the host has
// more ranks than cores), then yields (until kYield),
// then sleeps on its doorbell in slices of at most kSleepSlice, between
// which it checks the deadline, abort and whether its peers are alive.
inline constexpr std::chrono::microseconds kSpin{20}, kYield{100};
inline constexpr std::chrono::milliseconds kSleepSlice{10};

inline long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Shared (not FUTEX_PRIVATE) futexes: the waker may be another process.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Wakes the owner of `h` unconditionally (abort, close).
inline void ring_doorbell(SegmentHeader* h) {
  h->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futex(&h->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

// Loads `a` after a store-load barrier. ThreadSanitizer does not support
// fences, so there a seq_cst read-modify-write of `a` stands in for one
// (slower: it takes the cache line exclusive).
inline uint32_t load_after_barrier(std::atomic<uint32_t>& a) {
#if defined(MDDP_TSAN)
  return a.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return a.load(std::memory_order_relaxed);
#endif
}

// Wakes the owner of `h` if it sleeps, after we published a counter.
inline void notify(SegmentHeader* h) {
  if (load_after_barrier(h->sleepers) > 0) {
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex(&h->doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

// Sleeps on `me`'s doorbell until rung or `left` passes, unless `ready()`
// (seq_cst loads) already holds once this thread counts as a sleeper.
template <typename Ready>
void sleep_on_doorbell(SegmentHeader* me, std::chrono::nanoseconds left, Ready&& ready) {
  me->sleepers.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = me->doorbell.load(std::memory_order_seq_cst);
  if (!ready()) {
    const int64_t ns = left.count() > 0 ? left.count() : 0;
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    futex(&me->doorbell, FUTEX_WAIT, seen, &ts);
  }
  me->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace mddp::comm::shm
