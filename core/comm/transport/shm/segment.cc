#include "core/comm/transport/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <sstream>
#include <utility>
#include <vector>

#include "core/comm/types.h"
#include "core/common/hmac.h"

namespace mddp::comm::shm {

OwnerState owner_state(const SegmentHeader& h) {
  if (h.closed.load(std::memory_order_acquire) != 0) return OwnerState::kClosed;
  return liveness(h.owner) == Liveness::kGone ? OwnerState::kGone : OwnerState::kRunning;
}
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name) {
  const char* hint =
      errno == ENOSPC || errno == ENOMEM ? " (is /dev/shm full? try --transport tcp)"
      : errno == ENOENT
          ? " (ranks in different containers do not share /dev/shm: use --transport tcp)"
          : "";
  throw CommError(str("shared memory: ", what, " '", name, "': ", std::strerror(errno), hint));
}

#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14's value
#endif

constexpr const char* kShmDir = "/dev/shm";  // where glibc's shm_open keeps the names
constexpr const char* kPrefix = "mddp-";

// The creator of a segment from its name (Note [Orphaned segments]); false
// for names of another form (another program, an older microddp).
bool creator_of(const std::string& name, ProcessId& id) {
  if (name.rfind(kPrefix, 0) != 0) return false;
  std::vector<std::string> parts;
  std::istringstream in(name.substr(std::strlen(kPrefix)));
  for (std::string part; std::getline(in, part, '-');) parts.push_back(part);
  if (parts.size() != 6 || parts[5].size() < 2 || parts[5][0] != 'r') return false;
  try {
    std::size_t end = 0;
    id.pid_ns = std::stoull(parts[1], &end);
    if (end != parts[1].size()) return false;
    id.pid = static_cast<int32_t>(std::stol(parts[2], &end));
    if (end != parts[2].size()) return false;
    id.start_ticks = std::stoull(parts[3], &end);
    return end == parts[3].size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string Segment::make_name(uint64_t job_hash, int rank) {
  const ProcessId me = self_process_id();
  return str("/", kPrefix, std::hex, job_hash & 0xffffffffu, std::dec, "-", me.pid_ns, "-", me.pid,
             "-", me.start_ticks, "-", to_hex(random_bytes(16)), "-r", rank);
}

int Segment::remove_orphans() {
  DIR* dir = ::opendir(kShmDir);
  if (!dir) return 0;
  std::vector<std::string> orphans;
  while (const dirent* e = ::readdir(dir)) {
    ProcessId creator;
    if (creator_of(e->d_name, creator) && liveness(creator) == Liveness::kGone)
      orphans.emplace_back(e->d_name);
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto& name : orphans) removed += ::shm_unlink(("/" + name).c_str()) == 0 ? 1 : 0;
  return removed;
}

Segment Segment::create(const std::string& name, int rank, int size, uint64_t job_hash,
                        uint64_t ring_capacity, uint64_t arena_bytes, const std::string& tag) {
  MDDP_CHECK_EQ(tag.size(), kSegmentTagBytes);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST)
    throw CommError(str("shared memory: a segment named '", name,
                        "' exists already: refused, never used. Its name has 128 random bits, so "
                        "it was not chance: "
                        "another process made it first (see who owns it: ls -l /dev/shm)"));
  if (fd < 0) fail("cannot create", name);
  Segment s;
  s.name_ = name;  // from here on, the destructor unlinks it
  s.fd_ = fd;
  s.bytes_ = bytes_for(size, ring_capacity, arena_bytes);
  const std::size_t rings = bytes_for(size, ring_capacity, 0);
  // The rings' pages are allocated now (a full /dev/shm fails here, not
  // with a SIGBUS at the first message); the arena stays sparse.
  if (::ftruncate(fd, static_cast<off_t>(s.bytes_)) != 0) fail("cannot size", name);
  if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(rings)); e != 0) {
    errno = e;
    fail("cannot allocate", name);
  }
  s.base_ = ::mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    fail("cannot map", name);
  }
  // Map the rings' pages now, not on the first message (advice only: older
  // kernels have no MADV_POPULATE_WRITE and fault them in as they go).
  ::madvise(s.base_, rings, kPopulateWrite);
  auto* h = new (s.base_) SegmentHeader{};
  h->version = kSegmentVersion;
  h->rank = rank;
  h->size = size;
  h->owner = self_process_id();
  h->pid = h->owner.pid;
  h->job_hash = job_hash;
  h->ring_capacity = ring_capacity;
  h->arena_bytes = arena_bytes;
  std::memcpy(h->tag, tag.data(), kSegmentTagBytes);
  for (int sender = 0; sender < size; ++sender)
    if (sender != rank) new (s.ring(sender)) RingHeader{};
  h->magic.store(kSegmentMagic, std::memory_order_release);
  return s;
}

Segment Segment::attach(const std::string& name, int rank, int size, uint64_t job_hash,
                        const std::string& tag) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) fail(str("cannot open rank ", rank, "'s segment"), name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kPage) {
    ::close(fd);
    throw CommError(str("shared memory: rank ", rank, "'s segment '", name, "' is truncated"));
  }
  // Note [Segments nobody else can use]: made by this user, for this user only.
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    ::close(fd);
    throw CommError(str("shared memory: refused rank ", rank, "'s segment '", name,
                        "': it is owned by uid ", st.st_uid, " with mode ", std::oct,
                        (st.st_mode & 0777), std::dec, ", not by this user (uid ", ::geteuid(),
                        ") alone: not made by a rank of this job"));
  }
  Segment s;
  s.bytes_ = static_cast<std::size_t>(st.st_size);
  s.base_ = ::mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    fail("cannot map", name);
  }
  const SegmentHeader* h = s.header();
  if (h->magic.load(std::memory_order_acquire) != kSegmentMagic || h->version != kSegmentVersion ||
      h->rank != rank || h->size != size || h->job_hash != job_hash ||
      s.bytes_ != bytes_for(size, h->ring_capacity, h->arena_bytes))
    throw CommError(str("shared memory: segment '", name, "' is not rank ", rank, " of ", size,
                        " of this job (stale name in the store, or a different microddp build?)"));
  if (!constant_time_equal(
          std::string_view(reinterpret_cast<const char*>(h->tag), kSegmentTagBytes), tag))
    throw CommError(
        str("shared memory: refused segment '", name, "': it does not carry the tag of rank ", rank,
            " of this attempt (made without the attempt's key: a rank of an earlier attempt, or "
            "another program)"));
  return s;
}

Segment::Segment(Segment&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      name_(std::move(o.name_)) {
  o.name_.clear();
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    release();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    fd_ = std::exchange(o.fd_, -1);
    name_ = std::move(o.name_);
    o.name_.clear();
  }
  return *this;
}

Segment::~Segment() {
  release();
}

void Segment::release() {
  unlink();
  if (base_) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

int Segment::reserve(uint64_t offset, uint64_t bytes) const {
  MDDP_CHECK(fd_ >= 0, "only a segment's creator allocates its arena");
  MDDP_CHECK(offset + bytes <= header()->arena_bytes, "arena range past its end");
  const auto at = static_cast<off_t>(bytes_for(header()->size, capacity(), 0) + offset);
  return ::posix_fallocate(fd_, at, static_cast<off_t>(bytes));
}

void Segment::unlink() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  name_.clear();
}

RingHeader* Segment::ring(int sender) const {
  const int owner = header()->rank;
  const int slot = sender < owner ? sender : sender - 1;
  auto* p = static_cast<uint8_t*>(base_) + kPage +
            static_cast<std::size_t>(slot) * (kPage + header()->ring_capacity);
  return reinterpret_cast<RingHeader*>(p);
}

}  // namespace mddp::comm::shm
