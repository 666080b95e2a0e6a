// TcpTransport: the Transport over one TCP connection per pair of ranks,
// from scratch on POSIX sockets. See the spec comment in tcp_transport.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/transport.h"
#include "core/comm/transport/abort_signal.h"
#include "core/comm/transport/tcp/socket.h"

namespace mddp::comm {

class TcpTransport : public Transport {
 public:
  // Connects the full mesh (see tcp/mesh.h); blocks until every peer is
  // connected and handshaken or the timeout passes (TimeoutError naming the
  // missing ranks), or `abort` is aborted (AbortedError). Collective: every
  // rank of the job must call it.
  static std::unique_ptr<TcpTransport> connect(Store& store, int rank, int size,
                                               const JobIdentity& job,
                                               std::chrono::milliseconds timeout,
                                               const std::string& bind_host = "127.0.0.1",
                                               const std::string& prefix = "comm",
                                               const AbortSignal* abort = nullptr);
  // Takes over connected, handshaken sockets (fds[rank] unused).
  TcpTransport(int rank, int size, std::vector<tcp::Fd> fds);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "tcp"; }
  // Thread-safety: abort() from any thread; otherwise at most one thread at
  // a time sends to a given peer and one receives from it.
  void send_recv(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                 void* recv_data, std::size_t recv_bytes, Deadline deadline) override;
  void abort(const std::string& reason) override;
  // The kernel paces the connection's outgoing bytes (SO_MAX_PACING_RATE).
  void limit_send_rate(int peer, double bytes_per_second) override;

  struct Op;  // one frame being sent or received (tcp_transport.cc)

 private:
  struct Peer;
  void run(Op* ops, int count, Deadline deadline);
  bool advance(Op& op);
  [[noreturn]] void fail(Peer& p, const std::string& what, PeerFault fault);

  int rank_, size_;
  std::vector<std::unique_ptr<Peer>> peers_;
  AbortSignal abort_;
};

}  // namespace mddp::comm
