// The shared-memory data plane, for ranks on one host.
//
// Segments. Every rank creates one POSIX shared-memory segment (shm_open +
// mmap) holding the rings that carry messages *to* it, one per peer, and
// maps every peer's segment to write into its ring there (shm/segment.h).
// Names are "/mddp-<job hash>-<pid ns>-<pid>-<start>-<nonce>-r<rank>",
// published in the Store; once every rank has attached every segment, each
// creator unlinks its name, so /dev/shm is clean while the job runs and
// after it ends, even by a crash. A rank killed during the set-up itself
// leaves its name behind: the others remove it when their set-up fails, and
// every later set-up on the host removes what such dead creators left
// (Note [Orphaned segments] in shm/segment.h).
//
// Ring. A single-producer single-consumer byte ring per directed pair,
// capacity a power of two (4 MiB by default). head and tail are byte counts
// that only grow, each on its own cache line; the producer alone writes
// head, the consumer alone writes tail. The producer copies bytes in, then
// publishes head with a release store; the consumer reads head with an
// acquire load, copies bytes out, then publishes tail with a release store
// (which frees the space). Each side caches the other's counter and reloads
// it only when the cached value says full/empty, to keep the cache line
// still. Messages larger than the ring stream through it in chunks of at
// most 256 KiB (a size that stays in L2 between the two copies), so a
// 64 MiB message needs no 64 MiB of shared memory and the receiver starts
// copying out while the sender is still copying in.
//
// Frames. As on TCP each message is a 16-byte header (transport/frame.h: u32
// magic "MDDF", u32 sequence, u64 length) followed by the payload, written
// into the ring as one byte stream; the receiver checks the header against
// what it expects before it copies a payload byte, and a mismatch is a
// PeerError naming both lengths. Payload is copied straight from the sender's buffer into the ring
// and from the ring into the receiver's buffer: two copies, no staging.
//
// Single copy. Two copies through a ring cost twice the memory traffic, the
// limit for large messages. So a message of at least single_copy_min_bytes
// (256 KiB) goes as a *direct* frame: magic "MDDC", the same sequence and
// length, then u64 address of the sender's buffer and u64 zero (32 bytes in
// all). The receiver validates it as any header, copies the payload with
// process_vm_readv straight from the sender's memory into its own buffer in
// 4 MiB steps, then bumps the ring's `acked` counter; the sender's send
// returns once `acked` covers its frame, so its buffer stays valid while it is
// read. Used only towards a receiver that proved at connect time it may read
// every peer's memory (it read a known probe value in each; ptrace rules,
// containers or seccomp may forbid it), else everything takes the ring.
//
// Waiting. A waiting side first spins (20 us, pause; not at all when the
// host has more ranks than this process may use cores: the spinner would
// hold the core its peer needs), then yields (until 100 us), then sleeps
// on its rank's *doorbell*, a futex word in its own segment: whoever
// publishes head or tail that the sleeper waits on bumps the doorbell and
// wakes it if it is asleep (a sleeper count, and seq_cst fences on both
// sides, close the lost-wakeup race: See Note [Doorbell] in
// shm/doorbell.h). One doorbell per rank lets send_recv wait on its send
// and its receive at once.
// Sleeps last at most 10 ms, and between them the sleeper checks the deadline
// (TimeoutError), abort() (which also rings the doorbell, so it is seen at
// once) and whether the peers it waits on are alive: the closed flag a peer
// sets when its transport is destroyed (PeerFault::kClosed), and whether its
// process still runs (shm::liveness: pid, start time, not a zombie), for a
// peer that died without a word (kDied). A call that fails
// halfway through a frame leaves that direction out of step, so every later
// call on it throws the same error.
#include "core/comm/transport/shm/shm_transport.h"

#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/comm/transport/cpu_relax.h"
#include "core/comm/transport/frame.h"
#include "core/comm/transport/pending_frames.h"
#include "core/comm/transport/shm/doorbell.h"
#include "core/common/hmac.h"

namespace mddp::comm {

namespace {
using namespace std::chrono_literals;
using shm::kSleepSlice;
using shm::kSpin;
using shm::kYield;
using shm::notify;
using shm::ring_doorbell;
using shm::RingHeader;
using shm::SegmentHeader;

constexpr uint32_t kFrameMagic = frame::kMagic;  // bytes 'M' 'D' 'D' 'F': payload in the ring
constexpr uint32_t kDirectMagic =
    0x4344444d;  // bytes 'M' 'D' 'D' 'C': payload read from the sender
using frame::kHeaderBytes;
constexpr std::size_t kDirectHeaderBytes = 32;
constexpr std::size_t kChunk = 256 << 10;
constexpr std::size_t kDirectChunk = 4 << 20;
constexpr uint64_t kProbeValue = 0x626f7270706464dull;
const volatile uint64_t probe_word = kProbeValue;  // read by peers to test process_vm_readv

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// What a segment's header carries to prove its creator holds the attempt's
// key (Note [Segments nobody else can use] in shm/segment.h).
std::string segment_tag(const JobIdentity& job, int rank, int size, const std::string& name) {
  const std::string attempt = std::to_string(job.attempt), r = std::to_string(rank),
                    n = std::to_string(size);
  return hmac_sha256(job.key, transcript({"microddp-shm-v2", job.job_id, attempt, r, n, name}));
}

void copy_in(uint8_t* ring, uint64_t cap, uint64_t pos, const uint8_t* src, std::size_t n) {
  if (n == 0) return;  // src may be null for an empty message
  std::size_t off = pos & (cap - 1), first = std::min<std::size_t>(n, cap - off);
  std::memcpy(ring + off, src, first);
  std::memcpy(ring, src + first, n - first);
}

void copy_out(const uint8_t* ring, uint64_t cap, uint64_t pos, uint8_t* dst, std::size_t n) {
  if (n == 0) return;  // dst may be null for an empty message
  std::size_t off = pos & (cap - 1), first = std::min<std::size_t>(n, cap - off);
  std::memcpy(dst, ring + off, first);
  std::memcpy(dst + first, ring, n - first);
}

// Test seam (tests/fault/shm_leak_test.sh): MDDP_TEST_SHM_SETUP_PAUSE_MS holds
// the set-up for that long right after this rank's segment exists and its
// name is published, the window in which a killed rank leaves its segment
// behind (Note [Orphaned segments] in segment.h).
void pause_for_tests() {
  const char* ms = std::getenv("MDDP_TEST_SHM_SETUP_PAUSE_MS");
  if (ms && *ms) std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(ms)));
}

// The cores this process may run on (its affinity mask; the cgroup's CPU
// quota is not counted).
int usable_cpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// Whether this process may read `pid`'s memory: it reads the probe word there.
bool can_read_directly(int pid, uint64_t probe_addr) {
  uint64_t value = 0;
  iovec local{&value, sizeof value};
  iovec remote{reinterpret_cast<void*>(probe_addr), sizeof value};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof value) &&
         value == kProbeValue;
}
}  // namespace

struct ShmTransport::Channel {
  int peer = 0;
  RingHeader* ring = nullptr;
  uint8_t* data = nullptr;
  uint64_t cap = 0;
  uint64_t pos = 0;   // ours: head when producing, tail when consuming
  uint64_t seen = 0;  // theirs, as last loaded: tail when producing, head when consuming
  SegmentHeader* peer_header = nullptr;  // the peer's: its doorbell, pid and closed flag
  shm::ProcessId owner;                  // the peer's process, to see it die (shm::liveness)
  bool direct = false;                   // out: the peer reads large messages from our buffers
  uint64_t direct_frames = 0;            // single-copy frames sent (out) or finished (in)
  uint32_t seq = 0;
  std::string broken;  // set once the channel failed; every later call rethrows it
  PeerFault broken_fault = PeerFault::kUnknown;
};

struct ShmTransport::Op {
  Channel* ch = nullptr;
  bool sending = false;
  uint8_t header[kDirectHeaderBytes] = {};
  std::size_t header_bytes = kHeaderBytes, header_done = 0;
  uint8_t* data = nullptr;
  std::size_t bytes = 0, done = 0;
  bool direct = false;      // a single-copy frame
  uint64_t remote = 0;      // receiving direct: the sender's buffer address
  uint64_t ack_target = 0;  // sending direct: `acked` value that means done
  bool finished = false;
  bool needs_ring() const { return header_done < header_bytes || (!direct && done < bytes); }
};

std::unique_ptr<ShmTransport> ShmTransport::connect(Store& store, int rank, int size,
                                                    const JobIdentity& job,
                                                    std::chrono::milliseconds timeout,
                                                    const std::string& prefix,
                                                    const ShmOptions& options) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
  const std::size_t ring_bytes = options.ring_bytes != 0 ? options.ring_bytes
                                 : size <= 8             ? (4u << 20)
                                                         : (1u << 20);
  MDDP_CHECK(ring_bytes >= 4096 && (ring_bytes & (ring_bytes - 1)) == 0,
             "ring capacity must be a power of two >= 4096, got ", ring_bytes);
  std::vector<shm::Segment> segments(static_cast<std::size_t>(size));
  if (size == 1)
    return std::unique_ptr<ShmTransport>(
        new ShmTransport(rank, size, std::move(segments), options));

  const Deadline deadline = Clock::now() + timeout;
  auto get = [&](const std::string& key, int r, const char* what) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      return store.get(key, std::max(left, 0ms));
    } catch (const TimeoutError& e) {
      throw TimeoutError(str("rank ", rank, ": rank ", r, " never ", what,
                             " its shared-memory segment (", e.what(),
                             "); did it start, on this host?"));
    }
  };
  // Names left by creators that died in an earlier set-up on this host (Note [Orphaned segments]).
  if (const int n = shm::Segment::remove_orphans(); n > 0)
    spdlog::info(
        "removed {} shared-memory segment{} left in /dev/shm by processes that died during set-up",
        n, n == 1 ? "" : "s");
  const uint64_t job_hash = fnv1a(job.job_id);  // names the job in segment names: no secret
  auto& mine = segments[static_cast<std::size_t>(rank)];
  const std::string my_name = shm::Segment::make_name(job_hash, rank);
  mine = shm::Segment::create(my_name, rank, size, job_hash, ring_bytes, options.arena_bytes,
                              segment_tag(job, rank, size, my_name));
  try {
    mine.header()->probe_addr.store(reinterpret_cast<uint64_t>(&probe_word),
                                    std::memory_order_release);
    store.set(str(prefix, "/shm/seg/", rank), mine.name());
    pause_for_tests();
    bool reads_direct = options.single_copy_min_bytes > 0;
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      auto& theirs = segments[static_cast<std::size_t>(r)];
      const std::string name = get(str(prefix, "/shm/seg/", r), r, "published");
      theirs = shm::Segment::attach(name, r, size, job_hash, segment_tag(job, r, size, name));
      reads_direct = reads_direct &&
                     can_read_directly(theirs.header()->pid,
                                       theirs.header()->probe_addr.load(std::memory_order_acquire));
    }
    mine.header()->reads_direct.store(reads_direct ? 1 : 0, std::memory_order_release);
    store.set(str(prefix, "/shm/attached/", rank), "1");
    for (int r = 0; r < size; ++r)
      if (r != rank) get(str(prefix, "/shm/attached/", r), r, "attached");
  } catch (...) {
    // The set-up failed, often because a peer died in it: its name would stay in /dev/shm.
    segments.clear();  // unlinks ours
    shm::Segment::remove_orphans();
    throw;
  }
  mine.unlink();  // everyone has it mapped: the name is no longer needed
  return std::unique_ptr<ShmTransport>(new ShmTransport(rank, size, std::move(segments), options));
}

ShmTransport::ShmTransport(int rank, int size, std::vector<shm::Segment> segments,
                           const ShmOptions& options)
    : rank_(rank),
      size_(size),
      options_(options),
      spin_(size <= usable_cpus() ? kSpin : std::chrono::microseconds{0}),
      out_(size),
      in_(size) {
  for (auto& s : segments) segments_.push_back(std::make_shared<shm::Segment>(std::move(s)));
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const auto& theirs = *segments_[static_cast<std::size_t>(p)];
    const auto& mine = *segments_[static_cast<std::size_t>(rank)];
    auto out = std::make_unique<Channel>();
    out->peer = p;
    out->ring = theirs.ring(rank);
    out->data = theirs.ring_data(rank);
    out->cap = theirs.capacity();
    out->peer_header = theirs.header();
    out->owner = theirs.header()->owner;
    out->direct = options.single_copy_min_bytes > 0 &&
                  theirs.header()->reads_direct.load(std::memory_order_acquire);
    auto in = std::make_unique<Channel>(*out);
    in->direct = false;
    in->ring = mine.ring(p);
    in->data = mine.ring_data(p);
    in->cap = mine.capacity();
    out_[static_cast<std::size_t>(p)] = std::move(out);
    in_[static_cast<std::size_t>(p)] = std::move(in);
  }
}

ShmTransport::~ShmTransport() {
  if (size_ == 1) return;
  segments_[static_cast<std::size_t>(rank_)]->header()->closed.store(1, std::memory_order_release);
  for (int p = 0; p < size_; ++p)
    if (p != rank_) ring_doorbell(segments_[static_cast<std::size_t>(p)]->header());
}

void ShmTransport::abort(const std::string& reason) {
  abort_.abort(reason);
  if (size_ > 1) ring_doorbell(segments_[static_cast<std::size_t>(rank_)]->header());
}

void ShmTransport::send_recv(int send_peer, const void* send_data, std::size_t send_bytes,
                             int recv_peer, void* recv_data, std::size_t recv_bytes,
                             Deadline deadline) {
  Op ops[2];
  int count = 0;
  auto add = [&](int peer, bool sending, const void* data, std::size_t bytes) {
    check_message(peer, data, bytes);
    Op& op = ops[count++];
    op.ch = (sending ? out_ : in_)[static_cast<std::size_t>(peer)].get();
    op.sending = sending;
    op.data = static_cast<uint8_t*>(const_cast<void*>(data));
    op.bytes = bytes;
    if (sending) {
      op.direct = op.ch->direct && bytes >= options_.single_copy_min_bytes;
      op.header_bytes = op.direct ? kDirectHeaderBytes : kHeaderBytes;
      frame::encode(op.header, {op.direct ? kDirectMagic : kFrameMagic, op.ch->seq, bytes});
      frame::store_le(op.header + 16, reinterpret_cast<uint64_t>(data), 8);
    }
  };
  if (send_peer != kNoPeer) add(send_peer, true, send_data, send_bytes);   // else recv() alone
  if (recv_peer != kNoPeer) add(recv_peer, false, recv_data, recv_bytes);  // else send() alone
  run(ops, count, deadline);
}

void ShmTransport::fail(Channel& c, const std::string& what, PeerFault fault) {
  c.broken = str("rank ", rank_, ": shared memory with rank ", c.peer, ": ", what);
  c.broken_fault = fault;
  throw PeerError(c.broken, c.peer, fault);
}

// Copies what the ring allows now (header, then payload unless direct);
// true when anything moved. A direct send then waits for the receiver's ack.
bool ShmTransport::advance_send(Op& op) {
  Channel& c = *op.ch;
  bool progressed = false;
  while (op.needs_ring()) {
    uint64_t room = c.cap - (c.pos - c.seen);
    if (room == 0) {
      c.seen = c.ring->tail.load(std::memory_order_acquire);
      room = c.cap - (c.pos - c.seen);
      if (room == 0) break;
    }
    std::size_t h = std::min<std::size_t>(room, op.header_bytes - op.header_done);
    copy_in(c.data, c.cap, c.pos, op.header + op.header_done, h);
    c.pos += h;
    op.header_done += h;
    std::size_t n =
        op.direct ? 0 : std::min(std::min<std::size_t>(room - h, op.bytes - op.done), kChunk);
    copy_in(c.data, c.cap, c.pos, op.data + op.done, n);
    c.pos += n;
    op.done += n;
    c.ring->head.store(c.pos, std::memory_order_release);
    notify(c.peer_header);
    progressed = true;
    if (op.direct && op.header_done == op.header_bytes) op.ack_target = ++c.direct_frames;
  }
  if (op.direct && !op.needs_ring() &&
      c.ring->acked.load(std::memory_order_acquire) >= op.ack_target)
    op.done = op.bytes;
  if (!op.needs_ring() && op.done == op.bytes) {
    op.finished = true;
    ++c.seq;
    progressed = true;
  }
  return progressed;
}

// Copies what has arrived (header, checked as soon as complete, then payload
// from the ring or straight from the sender); true when anything moved.
bool ShmTransport::advance_recv(Op& op) {
  Channel& c = *op.ch;
  bool progressed = false;
  while (!op.finished) {
    if (op.needs_ring()) {
      uint64_t avail = c.seen - c.pos;
      if (avail == 0) {
        c.seen = c.ring->head.load(std::memory_order_acquire);
        avail = c.seen - c.pos;
        if (avail == 0) break;
      }
      std::size_t h = std::min<std::size_t>(avail, op.header_bytes - op.header_done);
      copy_out(c.data, c.cap, c.pos, op.header + op.header_done, h);
      c.pos += h;
      op.header_done += h;
      if (h > 0 && op.header_done == kHeaderBytes) {  // the common part: check before anything else
        const frame::Header f = frame::decode(op.header);
        const std::string wrong = frame::mismatch(
            f, f.magic == kFrameMagic || f.magic == kDirectMagic, c.peer, rank_, c.seq, op.bytes);
        if (!wrong.empty()) fail(c, wrong, PeerFault::kUnknown);
        op.direct = f.magic == kDirectMagic;
        op.header_bytes = op.direct ? kDirectHeaderBytes : kHeaderBytes;
      }
      if (op.direct && op.header_done == op.header_bytes)
        op.remote = frame::load_le(op.header + 16, 8);
      std::size_t n = 0;
      if (op.header_done == op.header_bytes && !op.direct)
        n = std::min(std::min<std::size_t>(avail - h, op.bytes - op.done), kChunk);
      copy_out(c.data, c.cap, c.pos, op.data + op.done, n);
      c.pos += n;
      op.done += n;
      c.ring->tail.store(c.pos, std::memory_order_release);
      notify(c.peer_header);
      progressed = true;
    } else if (op.done < op.bytes) {  // direct: one step straight from the sender's buffer
      std::size_t n = std::min(op.bytes - op.done, kDirectChunk);
      iovec local{op.data + op.done, n};
      iovec remote{reinterpret_cast<void*>(op.remote + op.done), n};
      ssize_t got = ::process_vm_readv(c.owner.pid, &local, 1, &remote, 1, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        fail(c,
             str("cannot read ", n, " bytes from rank ", c.peer, "'s buffer (pid ", c.owner.pid,
                 "): ", got < 0 ? std::strerror(errno) : "nothing read",
                 got < 0 && errno == ESRCH ? " (it died)" : ""),
             got < 0 && errno == ESRCH ? PeerFault::kDied : PeerFault::kUnknown);
      op.done += static_cast<std::size_t>(got);
      progressed = true;
      if (op.done == op.bytes) {
        c.ring->acked.store(++c.direct_frames, std::memory_order_release);
        notify(c.peer_header);
      }
    }
    if (!op.needs_ring() && op.done == op.bytes) {
      op.finished = true;
      ++c.seq;
    }
  }
  return progressed;
}

bool ShmTransport::could_advance(const Op& op) const {
  const Channel& c = *op.ch;
  if (op.finished) return false;
  // seq_cst loads: the waiter's half of Note [Doorbell].
  if (!op.needs_ring())
    return !op.sending || c.ring->acked.load(std::memory_order_seq_cst) >= op.ack_target;
  if (op.sending) return c.pos - c.ring->tail.load(std::memory_order_seq_cst) < c.cap;
  return c.ring->head.load(std::memory_order_seq_cst) != c.pos;
}

namespace {
PeerLink shm_link(ShmTransport::Op& op) {
  return {op.ch->peer, op.ch->broken, op.ch->broken_fault};
}
}  // namespace

void ShmTransport::run(Op* ops, int count, Deadline deadline) {
  const auto start = Clock::now();
  refuse_broken_links(ops, count, shm_link);
  Clock::time_point idle_since{}, next_liveness_check{};
  uint32_t idle_rounds = 0;
  while (true) {
    if (abort_.aborted())
      throw AbortedError(str("rank ", rank_, ": communication aborted: ", abort_.reason()));
    bool progressed = false, all = true;
    for (int i = 0; i < count; ++i) {
      if (!ops[i].finished)
        progressed = (ops[i].sending ? advance_send(ops[i]) : advance_recv(ops[i])) || progressed;
      all = all && ops[i].finished;
    }
    if (all) return;
    if (progressed) {
      idle_rounds = 0;
      continue;
    }
    if (idle_rounds++ == 0) idle_since = Clock::now();
    if (spin_.count() > 0 && idle_rounds % 64 != 0) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      throw_frames_timed_out(rank_, now - start, ops, count, shm_link);
    }
    if (now - idle_since < spin_) continue;
    if (now - idle_since < kYield) {
      ::sched_yield();
      continue;
    }
    if (now >= next_liveness_check) {
      check_peers_alive(ops, count);
      next_liveness_check = now + kSleepSlice;
    }
    sleep(ops, count, deadline);
  }
}

void ShmTransport::sleep(Op* ops, int count, Deadline deadline) {
  const auto left = std::min<Clock::duration>(deadline - Clock::now(), kSleepSlice);
  shm::sleep_on_doorbell(segments_[static_cast<std::size_t>(rank_)]->header(), left, [&] {
    bool ready = abort_.aborted();
    for (int i = 0; i < count; ++i) ready = ready || could_advance(ops[i]);
    return ready;
  });
}

void ShmTransport::check_peers_alive(Op* ops, int count) {
  for (int i = 0; i < count; ++i) {
    if (ops[i].finished) continue;
    Channel& c = *ops[i].ch;
    // The peer's end first, then the ring: a peer that wrote its last bytes
    // and exited between a look at the ring and a look at the peer left
    // them there to take; only an op with nothing left to take fails.
    const shm::OwnerState peer = shm::owner_state(*c.peer_header);
    if (peer == shm::OwnerState::kRunning || could_advance(ops[i])) continue;
    const char* doing = ops[i].sending ? "sending" : "receiving";
    if (peer == shm::OwnerState::kClosed)
      fail(c,
           str("rank ", c.peer, " closed its transport while rank ", rank_, " was ", doing, " ",
               ops[i].bytes, " bytes (", ops[i].done,
               " done): it exited or left the collective early"),
           PeerFault::kClosed);
    fail(c,
         str("rank ", c.peer, " (pid ", c.owner.pid, ") died while rank ", rank_, " was ", doing,
             " ", ops[i].bytes, " bytes (", ops[i].done, " done); see its log or exit status"),
         PeerFault::kDied);
  }
}

}  // namespace mddp::comm
