// ShmTransport: the Transport for ranks on one host, through shared memory.
// See the spec comment in shm_transport.cc.
#pragma once

#include <memory>
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
};

class ShmTransport : public Transport {
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

  int rank_, size_;
  ShmOptions options_;
  std::vector<shm::Segment> segments_;              // [r]: rank r's segment (rings into r)
  std::vector<std::unique_ptr<Channel>> out_, in_;  // [peer]
  AbortSignal abort_;
};

}  // namespace mddp::comm
