// ShmTransport: the Transport for ranks on one host, through shared memory.
// See the spec comment in shm_transport.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/transport.h"
#include "core/comm/transport/abort_signal.h"
#include "core/comm/transport/shm/segment.h"

namespace mddp::comm {

struct ShmOptions {
  // Bytes of ring per directed pair, a power of two >= 4096; 0 picks 4 MiB
  // (1 MiB above 8 ranks).
  std::size_t ring_bytes = 0;
  // Messages of at least this many bytes are read by the receiver straight
  // from the sender's buffer (process_vm_readv, one copy) when the peers may
  // read each other's memory; 0 never does.
  std::size_t single_copy_min_bytes = 256 << 10;
  // Bytes of address space each rank reserves for its shared buffers
  // (HostSharedMemory::allocate): pages are taken from /dev/shm only when
  // allocated. 0: no arena, and every all-reduce takes the rings.
  std::size_t arena_bytes = std::size_t{1} << 30;
};

class ShmTransport : public Transport, public HostSharedMemory {
 public:
  // Creates this rank's segment, attaches every peer's, and waits until all
  // ranks attached before unlinking its own name (so nothing is left in
  // /dev/shm). Collective; TimeoutError names the missing ranks.
  static std::unique_ptr<ShmTransport> connect(Store& store, int rank, int size,
                                               const JobIdentity& job,
                                               std::chrono::milliseconds timeout,
                                               const std::string& prefix = "comm",
                                               const ShmOptions& options = {});
  ~ShmTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "shm"; }
  // Thread-safety: abort() from any thread; otherwise at most one thread at
  // a time sends to a given peer and one receives from it.
  void send_recv(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                 void* recv_data, std::size_t recv_bytes, Deadline deadline) override;
  void abort(const std::string& reason) override;
  HostSharedMemory* shared_memory() override { return this; }

  // HostSharedMemory (shared_memory.h; implemented in shm/shared_memory.cc).
  // Thread-safety: allocate() from any thread; the rest on the thread that
  // sends and receives.
  std::shared_ptr<void> allocate(std::size_t bytes) override;
  bool holds(const void* data, std::size_t bytes) const override;
  Post post(const void* data, std::size_t bytes) override;
  std::byte* posted(int peer, uint64_t seq, std::size_t bytes, Deadline deadline) override;
  void finish(uint64_t seq) override;
  void wait_finished(int peer, uint64_t seq, Deadline deadline) override;

  struct Channel;  // one direction with one peer (shm_transport.cc)
  struct Op;       // one message being sent or received

 private:
  ShmTransport(int rank, int size, std::vector<shm::Segment> segments, const ShmOptions& options);
  void run(Op* ops, int count, Deadline deadline);
  bool advance_send(Op& op);
  bool advance_recv(Op& op);
  bool could_advance(const Op& op) const;
  void sleep(Op* ops, int count, Deadline deadline);
  void check_peers_alive(Op* ops, int count);
  [[noreturn]] void fail(Channel& c, const std::string& what, PeerFault fault);
  // The waiting of wait_finished() and posted(): until `word` of `peer`'s segment
  // reaches `seq`; `what` says what for, in errors.
  void wait_for(int peer, const std::atomic<uint64_t>& word, uint64_t seq, Deadline deadline,
                const char* what);
  void check_peer_alive(int peer, const std::atomic<uint64_t>& word, uint64_t seq,
                        const char* what);
  void signal_peers();  // rings the doorbell of every peer that sleeps

  int rank_, size_;
  ShmOptions options_;
  // [r]: rank r's segment (rings into r, its arena). Shared: the buffers
  // allocate() hands out keep this rank's mapped.
  std::vector<std::shared_ptr<shm::Segment>> segments_;
  std::mutex arena_mu_;                  // allocate()
  std::atomic<uint64_t> arena_used_{0};  // bytes of our arena handed out
  uint64_t direct_seq_ = 0;              // direct collectives posted
  // How long a wait spins before it yields: shm::kSpin, or nothing when the
  // host's ranks outnumber the cores this process may run on (a spinning
  // rank would hold the core the rank it waits for needs).
  std::chrono::microseconds spin_;
  std::vector<std::unique_ptr<Channel>> out_, in_;  // [peer]
  AbortSignal abort_;
};

}  // namespace mddp::comm
