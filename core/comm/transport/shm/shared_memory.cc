// ShmTransport as HostSharedMemory (core/comm/shared_memory.h): the arena
// at the end of each rank's segment (shm/segment.h), and the posts and
// signals of the direct collectives in its header.
//
// Arena. Every rank's segment ends with `arena_bytes` (1 GiB by default) of
// address space that every peer mapped at connect time, but no memory: the
// file is sparse. allocate() hands out page-aligned pieces of it from the
// front and asks tmpfs for their pages then (posix_fallocate), so a full
// /dev/shm (64 MiB in a default Docker container) is a nullptr and a
// warning here, never a SIGBUS in the middle of backward. Nothing is freed:
// what lives there (DDP's buckets) lives as long as the job.
//
// Posts and signals. For direct collective `seq` the owner writes
// post[seq % 2] = {seq, offset, bytes} and then `posted` = seq (release);
// a peer loads `posted` (acquire) and reads the slot. Two slots, because a
// rank whose buffer is private posts and runs on to the rings at once, and
// may post the next collective while a slower peer still reads this one's
// slot; it cannot get two ahead, because an all-reduce finishes on no rank
// before every rank has joined it, that is, has read every post.
// `finished` is the other signal, a counter only its owner writes. A waiter
// spins, yields, then sleeps on its own doorbell; every signal rings the
// peers' doorbells if they sleep (Note [Doorbell]).
#include <sched.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/comm/transport/cpu_relax.h"
#include "core/comm/transport/frame.h"
#include "core/comm/transport/shm/doorbell.h"
#include "core/comm/transport/shm/shm_transport.h"

namespace mddp::comm {
std::shared_ptr<void> ShmTransport::allocate(std::size_t bytes) {
  if (size_ == 1) return nullptr;  // no peers, no arena
  const auto& mine = segments_[static_cast<std::size_t>(rank_)];
  const uint64_t want = (std::max<uint64_t>(bytes, 1) + shm::Segment::kPage - 1) /
                        shm::Segment::kPage * shm::Segment::kPage;
  std::lock_guard lock(arena_mu_);
  const uint64_t used = arena_used_.load(std::memory_order_relaxed);
  if (used + want > mine->header()->arena_bytes) {
    spdlog::warn(
        "rank {}: the shared-memory arena ({:.1f} MiB) is full: a buffer of {} bytes goes to "
        "private memory, where peers cannot read it in place (slower all-reduce)",
        rank_, static_cast<double>(mine->header()->arena_bytes) / (1 << 20), bytes);
    return nullptr;
  }
  if (const int e = mine->reserve(used, want); e != 0) {
    spdlog::warn(
        "rank {}: no room in /dev/shm for a shared buffer of {} bytes ({}): it goes to "
        "private memory (slower all-reduce; a container needs a larger --shm-size)",
        rank_, bytes, std::strerror(e));
    return nullptr;
  }
  arena_used_.store(used + want, std::memory_order_release);
  // Aliasing: the buffer keeps this rank's segment mapped.
  return std::shared_ptr<void>(mine, mine->arena() + used);
}

bool ShmTransport::holds(const void* data, std::size_t bytes) const {
  if (size_ == 1) return false;
  const auto& mine = *segments_[static_cast<std::size_t>(rank_)];
  const auto* p = static_cast<const uint8_t*>(data);
  const uint64_t used = arena_used_.load(std::memory_order_acquire);
  return p >= mine.arena() && p + bytes <= mine.arena() + used;
}

HostSharedMemory::Post ShmTransport::post(const void* data, std::size_t bytes) {
  const uint64_t seq = ++direct_seq_;
  if (size_ == 1) return {seq, false};
  const auto& mine = *segments_[static_cast<std::size_t>(rank_)];
  const auto* p = static_cast<const uint8_t*>(data);
  const bool shared = holds(data, bytes);
  shm::SegmentHeader* h = mine.header();
  h->post[seq % 2] = {seq, shared ? static_cast<uint64_t>(p - mine.arena()) : shm::kNotShared,
                      bytes};
  h->posted.store(seq, std::memory_order_release);
  signal_peers();
  return {seq, shared};
}

std::byte* ShmTransport::posted(int peer, uint64_t seq, std::size_t bytes, Deadline deadline) {
  check_message(peer, nullptr, 0);
  const auto& theirs = *segments_[static_cast<std::size_t>(peer)];
  wait_for(peer, theirs.header()->posted, seq, deadline, "post its buffer");
  const shm::SegmentHeader::Post post = theirs.header()->post[seq % 2];
  // Worded as the rings word it (frame::mismatch): one error for the same
  // mistake whichever path the collective took.
  const std::string which = str("rank ", rank_, ": shared memory with rank ", peer, ": ");
  if (post.seq != seq)
    throw PeerError(str(which, "rank ", peer, " posted its buffer for another collective"), peer);
  const std::string wrong =
      frame::mismatch({frame::kMagic, 0, post.bytes}, true, peer, rank_, 0, bytes);
  if (!wrong.empty()) throw PeerError(which + wrong, peer);
  if (post.offset == shm::kNotShared) return nullptr;
  if (post.offset > theirs.header()->arena_bytes ||
      bytes > theirs.header()->arena_bytes - post.offset)
    throw PeerError(str(which, "rank ", peer, " posted a buffer outside its arena"), peer);
  return reinterpret_cast<std::byte*>(theirs.arena() + post.offset);
}

void ShmTransport::finish(uint64_t seq) {
  if (size_ == 1) return;
  segments_[static_cast<std::size_t>(rank_)]->header()->finished.store(seq,
                                                                       std::memory_order_release);
  signal_peers();
}

void ShmTransport::signal_peers() {
  for (int p = 0; p < size_; ++p)
    if (p != rank_) shm::notify(segments_[static_cast<std::size_t>(p)]->header());
}

void ShmTransport::wait_finished(int peer, uint64_t seq, Deadline deadline) {
  check_message(peer, nullptr, 0);
  wait_for(peer, segments_[static_cast<std::size_t>(peer)]->header()->finished, seq, deadline,
           "finish with this rank's buffer");
}

void ShmTransport::wait_for(int peer, const std::atomic<uint64_t>& word, uint64_t seq,
                            Deadline deadline, const char* what) {
  if (word.load(std::memory_order_acquire) >= seq) return;
  const auto& theirs = *segments_[static_cast<std::size_t>(peer)];
  const auto start = Clock::now();
  auto next_liveness_check = start;
  for (uint32_t round = 1;; ++round) {
    if (word.load(std::memory_order_acquire) >= seq) return;
    if (spin_.count() > 0 && round % 64 != 0) {
      cpu_relax();
      continue;
    }
    if (abort_.aborted())
      throw AbortedError(str("rank ", rank_, ": communication aborted: ", abort_.reason()));
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    if (now >= deadline)
      throw TimeoutError(str("rank ", rank_, ": timed out after ", waited.count(),
                             " ms waiting for rank ", peer, " to ", what,
                             " (direct all-reduce); is that rank alive, and running the same "
                             "collective?"));
    if (now - start < spin_) continue;
    if (now - start < kYield) {
      ::sched_yield();
      continue;
    }
    if (now >= next_liveness_check || theirs.header()->closed.load(std::memory_order_acquire)) {
      check_peer_alive(peer, word, seq, what);
      next_liveness_check = now + shm::kSleepSlice;
    }
    shm::sleep_on_doorbell(segments_[static_cast<std::size_t>(rank_)]->header(),
                           std::min<Clock::duration>(deadline - now, shm::kSleepSlice), [&] {
                             return abort_.aborted() ||
                                    word.load(std::memory_order_seq_cst) >= seq ||
                                    theirs.header()->closed.load(std::memory_order_seq_cst) != 0;
                           });
  }
}

// Throws PeerError when `peer` closed its transport or died without
// signalling `seq`. The peer's state first, then the word: a peer that
// signalled and then exited did its part.
void ShmTransport::check_peer_alive(int peer, const std::atomic<uint64_t>& word, uint64_t seq,
                                    const char* what) {
  const shm::SegmentHeader& h = *segments_[static_cast<std::size_t>(peer)]->header();
  const shm::OwnerState state = shm::owner_state(h);
  if (state == shm::OwnerState::kRunning || word.load(std::memory_order_acquire) >= seq) return;
  const std::string waiting =
      str("rank ", rank_, " waited for it to ", what, " (direct all-reduce)");
  if (state == shm::OwnerState::kClosed)
    throw PeerError(str("rank ", rank_, ": rank ", peer, " closed its transport while ", waiting,
                        ": it exited or left the collective early"),
                    peer, PeerFault::kClosed);
  throw PeerError(str("rank ", rank_, ": rank ", peer, " (pid ", h.owner.pid, ") died while ",
                      waiting, "; see its log or exit status"),
                  peer, PeerFault::kDied);
}

}  // namespace mddp::comm
