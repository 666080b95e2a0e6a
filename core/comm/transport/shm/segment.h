// The shared-memory segment of one rank: its doorbell and the rings that
// carry messages *to* it, one from each peer. See the spec comment in
// shm_transport.cc for how the rings are used.
//
//   page 0        SegmentHeader (identity, pid, closed flag, doorbell, the
//                 direct all-reduce's progress)
//   then, for each peer p != owner, in rank order:
//     one page    RingHeader (head, tail and acked, each on its own cache line)
//     capacity    ring bytes
//   arena_bytes   the owner's shared buffers (SharedBuffers), reserved, not
//                 allocated: pages exist only once the owner allocates them
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/comm/transport/shm/process_id.h"

namespace mddp::comm::shm {

constexpr uint64_t kSegmentMagic = 0x314d48534444444dull;  // "MDDDSHM1"
constexpr uint32_t kSegmentVersion = 4;
constexpr std::size_t kSegmentTagBytes = 32;

struct SegmentHeader {
  std::atomic<uint64_t> magic;  // set last by the creator (release): the segment is ready
  uint32_t version;
  int32_t rank, size;
  int32_t pid;      // of the owner (owner.pid), for process_vm_readv
  ProcessId owner;  // to tell when the owner has died (liveness())
  uint64_t job_hash;
  uint64_t ring_capacity;
  uint64_t arena_bytes;  // reserved for shared buffers, after the rings
  // HMAC of the attempt's key over this segment's identity (segment_tag in
  // shm_transport.cc): only a rank holding the key can make a segment its
  // peers accept.
  uint8_t tag[kSegmentTagBytes];
  // Address, in the owner's process, of a known 8-byte value: a peer that can
  // read it with process_vm_readv may read the owner's buffers directly.
  std::atomic<uint64_t> probe_addr;
  alignas(64) std::atomic<uint32_t> closed;  // 1 once the owner destroyed its transport
  std::atomic<uint32_t>
      reads_direct;  // 1 when the owner can read every peer's memory (single copy)
  // Bumped by whoever made progress possible for the owner (data into its
  // rings, space freed in the rings it writes); it sleeps on it with a futex.
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;  // owner threads asleep on the doorbell
  // The direct all-reduce's progress (direct_all_reduce.cc), written by the
  // owner only: the sequence number of the last collective whose buffer it
  // posted, and of the last in which it finished with its peers' buffers.
  alignas(64) std::atomic<uint64_t> posted;
  struct Post {
    uint64_t seq, offset, bytes;  // offset into the owner's arena, or kNotShared
  } post[2];                      // [seq % 2]: a peer may still read the previous one
  alignas(64) std::atomic<uint64_t> finished;
};
constexpr uint64_t kNotShared = ~uint64_t{0};

// How the owner of a segment stands, as a peer sees it: still running,
// closed (it destroyed its transport), or gone (its process exited without).
// Read before what the peer waits on: an owner that did its part and then
// exited left it done.
enum class OwnerState { kRunning, kClosed, kGone };
OwnerState owner_state(const SegmentHeader& h);

// A single-producer single-consumer byte ring. head and tail count bytes
// ever written and read (never wrap; 2^64 bytes is forever): used = head - tail.
struct RingHeader {
  alignas(64) std::atomic<uint64_t> head;  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer only
  // Single-copy frames the consumer has finished reading from the producer's
  // buffer (written by the consumer only): the producer's send waits for it.
  alignas(64) std::atomic<uint64_t> acked;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

// One mapped segment. The creator unlinks the name once every rank has
// attached (unlink()), or on destruction at the latest.
//
// Note [Orphaned segments]: a creator killed (kill -9, OOM) between create()
// and unlink() leaves its name in /dev/shm, and the memory with it. Names
// say who made them, "/mddp-<job>-<pid ns>-<pid>-<start ticks>-<nonce>-r<rank>",
// so remove_orphans() can unlink those whose creator no longer runs (same pid
// namespace only: another namespace's pids mean nothing here). It runs when
// a shared-memory job starts on the host, when a rank's set-up fails, and
// when `microddp run` ends.
//
// Note [Segments nobody else can use]: another local user must not read a
// rank's messages, nor slip it a segment of their own. So a segment is
// created with O_CREAT | O_EXCL and mode 0600 (owner only), under a name
// with 128 random bits that cannot be guessed in advance; a name that
// exists already is refused, never used (someone made it first). Its name
// reaches the peers only through the job's authenticated store, and a peer
// attaches only a segment owned by its own user, with no permission for
// anyone else, whose header carries the HMAC tag of the attempt's key.
class Segment {
 public:
  // A fresh name for rank `rank`'s segment of job `job_hash` (a hash of the
  // job id: it names the job, it is no secret), owned by this process, with
  // 128 random bits (Note [Segments nobody else can use]).
  static std::string make_name(uint64_t job_hash, int rank);
  // Unlinks every segment name of an orphaned creator
  // (Note [Orphaned segments]); returns how many. Never throws.
  static int remove_orphans();
  // Creates and maps a new segment named `name` (make_name()), owner only,
  // with `tag` in its header; refuses (CommError) a name that exists already.
  // The arena's `arena_bytes` are reserved (the file is sparse) and mapped,
  // and allocated only by reserve().
  static Segment create(const std::string& name, int rank, int size, uint64_t job_hash,
                        uint64_t ring_capacity, uint64_t arena_bytes, const std::string& tag);
  // Maps an existing segment and checks it belongs to rank `rank` of this
  // job and attempt: owned by this user, no permission for others, and
  // carrying `tag` (compared in constant time). Throws CommError otherwise.
  static Segment attach(const std::string& name, int rank, int size, uint64_t job_hash,
                        const std::string& tag);
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  ~Segment();

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  // The ring that carries messages from `sender` to this segment's owner.
  RingHeader* ring(int sender) const;
  uint8_t* ring_data(int sender) const { return reinterpret_cast<uint8_t*>(ring(sender)) + kPage; }
  uint64_t capacity() const { return header()->ring_capacity; }
  // The shared buffers' region, header()->arena_bytes long.
  uint8_t* arena() const {
    return static_cast<uint8_t*>(base_) + bytes_for(header()->size, capacity(), 0);
  }
  // Allocates the pages of arena()[offset, offset + bytes) (creator only):
  // 0, or the errno of a tmpfs that has no room left (ENOSPC), so that a
  // full /dev/shm is an error now and not a SIGBUS at the first write.
  int reserve(uint64_t offset, uint64_t bytes) const;
  const std::string& name() const { return name_; }  // "" once unlinked, or when attached
  void unlink();                                     // removes the name (creator only); idempotent

  static constexpr std::size_t kPage = 4096;
  static std::size_t bytes_for(int size, uint64_t ring_capacity, uint64_t arena_bytes) {
    return kPage + static_cast<std::size_t>(size > 0 ? size - 1 : 0) * (kPage + ring_capacity) +
           arena_bytes;
  }

 private:
  void release();
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  int fd_ = -1;       // the creator's, kept open for reserve()
  std::string name_;  // non-empty while we created it and have not unlinked it
};

}  // namespace mddp::comm::shm
