// The TCP data plane.
//
// Wire format. After the handshake (tcp/handshake.h) each connection carries
// frames in both directions, one per send() (transport/frame.h, as on shm):
//
//   u32 magic "MDDF" | u32 sequence | u64 length | length bytes of payload
//
// (little-endian; sequence counts the frames of that direction from 0). The
// receiver names the byte count it expects, so the header is validated
// before a single payload byte is read: a wrong magic or sequence means the
// stream is corrupt or out of step, a wrong length means the two ranks are
// running different collectives; both are PeerErrors naming the peer and
// both values, and the connection is dead from then on (its framing is lost).
// Payload goes straight between the socket and the caller's buffer (no
// staging copy); a 0-byte message is a bare header, so it still orders.
//
// Progress. Sockets are non-blocking. An operation is a small state machine
// (header, then payload) advanced until the socket would block; run() polls
// every unfinished operation's socket plus the abort eventfd, with the time
// left to the deadline. send_recv() runs its send and its receive in that
// one loop, so two neighbours that both send 64 MiB at once keep draining
// each other's data instead of deadlocking on full socket buffers.
//
// Spinning. A small message's reply is usually a few microseconds away on
// loopback or a fast network, while poll() puts the thread to sleep and the
// wake-up alone costs 5-20 us on a virtual machine: for a 4 KiB all-reduce
// that sleep was most of its latency. So a call that moves at most
// kSpinBytes first retries its non-blocking calls for up to kSpinFor (See
// Note [Spin, then sleep]) before it polls; big transfers poll at once,
// since their wake-ups are amortised and a spin would only take CPU from
// the backward pass computing beside them.
//
// Failures: EOF mid-message (the peer closed its end: PeerFault::kClosed)
// or a reset, aborted or broken connection (the peer died, or the network
// between the two failed: kReset) is a PeerError naming the peer; the deadline is a TimeoutError
// naming the peers still pending; abort() makes the eventfd readable and every call throws
// AbortedError. A call that fails halfway through a frame leaves that connection out of step, so
// every later call on it throws the same error. MSG_NOSIGNAL everywhere, so a dead peer never
// raises SIGPIPE.
#include "core/comm/transport/tcp/tcp_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "core/comm/transport/cpu_relax.h"
#include "core/comm/transport/frame.h"
#include "core/comm/transport/pending_frames.h"
#include "core/comm/transport/tcp/mesh.h"

namespace mddp::comm {

using frame::kHeaderBytes;

struct TcpTransport::Peer {
  int rank = 0;
  tcp::Fd fd;
  uint32_t send_seq = 0, recv_seq = 0;
  std::string broken;  // set once the connection failed; every later call rethrows it
  PeerFault broken_fault = PeerFault::kUnknown;
};

struct TcpTransport::Op {
  Peer* peer = nullptr;
  bool sending = false;
  uint8_t header[kHeaderBytes] = {};
  std::size_t header_done = 0;
  uint8_t* data = nullptr;
  std::size_t bytes = 0, done = 0;
  bool finished = false;
};

std::unique_ptr<TcpTransport> TcpTransport::connect(
    Store& store, int rank, int size, const JobIdentity& job, std::chrono::milliseconds timeout,
    const std::string& bind_host, const std::string& prefix, const AbortSignal* abort) {
  auto fds =
      tcp::connect_mesh(store, rank, size, job, Clock::now() + timeout, bind_host, prefix, abort);
  return std::make_unique<TcpTransport>(rank, size, std::move(fds));
}

TcpTransport::TcpTransport(int rank, int size, std::vector<tcp::Fd> fds)
    : rank_(rank), size_(size) {
  MDDP_CHECK(static_cast<int>(fds.size()) == size, "one socket per rank");
  for (int r = 0; r < size; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->fd = std::move(fds[static_cast<std::size_t>(r)]);
    MDDP_CHECK(r == rank || p->fd.valid(), "no connection to rank ", r);
    peers_.push_back(std::move(p));
  }
}

TcpTransport::~TcpTransport() = default;

void TcpTransport::abort(const std::string& reason) {
  abort_.abort(reason);
}

// A slow link without a slow network: the kernel's TCP pacing sends the
// connection's packets no faster than the rate (on loopback too), so the
// bytes arrive spread out as over a thin wire, and flow control slows the
// sender once the socket's buffer is full.
void TcpTransport::limit_send_rate(int peer, double bytes_per_second) {
  check_message(peer, nullptr, 0);
  MDDP_CHECK(bytes_per_second >= 1 && bytes_per_second < 4e9, "a send rate of ", bytes_per_second,
             " bytes/s");
  const auto rate = static_cast<unsigned>(bytes_per_second);
  if (::setsockopt(peers_[static_cast<std::size_t>(peer)]->fd.get(), SOL_SOCKET, SO_MAX_PACING_RATE,
                   &rate, sizeof rate) != 0)
    throw CommError(str("rank ", rank_, ": cannot pace the link to rank ", peer, ": ",
                        tcp::errno_string(errno)));
}

void TcpTransport::send_recv(int send_peer, const void* send_data, std::size_t send_bytes,
                             int recv_peer, void* recv_data, std::size_t recv_bytes,
                             Deadline deadline) {
  Op ops[2];
  int count = 0;
  auto add = [&](int peer, bool sending, const void* data, std::size_t bytes) {
    check_message(peer, data, bytes);
    Op& op = ops[count++];
    op.peer = peers_[static_cast<std::size_t>(peer)].get();
    op.sending = sending;
    op.data = static_cast<uint8_t*>(const_cast<void*>(data));
    op.bytes = bytes;
    if (sending) frame::encode(op.header, {frame::kMagic, op.peer->send_seq, bytes});
  };
  if (send_peer != kNoPeer) add(send_peer, true, send_data, send_bytes);   // else recv() alone
  if (recv_peer != kNoPeer) add(recv_peer, false, recv_data, recv_bytes);  // else send() alone
  run(ops, count, deadline);
}

void TcpTransport::fail(Peer& p, const std::string& what, PeerFault fault) {
  p.broken = str("rank ", rank_, ": connection to rank ", p.rank, ": ", what);
  p.broken_fault = fault;
  throw PeerError(p.broken, p.rank, fault);
}

namespace {
// The errors of a connection that broke under us (the peer's kernel reset
// it, or the path to it failed), as opposed to misuse of the socket.
bool connection_broke(int err) {
  return err == ECONNRESET || err == ECONNABORTED || err == EPIPE || err == ETIMEDOUT ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN || err == ENETRESET;
}
}  // namespace

// Moves bytes until the operation finishes (true) or the socket would block.
bool TcpTransport::advance(Op& op) {
  Peer& p = *op.peer;
  const int fd = p.fd.get();
  while (!op.finished) {
    ssize_t n;
    if (op.sending) {
      iovec iov[2];
      int iovcnt = 0;
      if (op.header_done < kHeaderBytes)
        iov[iovcnt++] = {op.header + op.header_done, kHeaderBytes - op.header_done};
      if (op.done < op.bytes) iov[iovcnt++] = {op.data + op.done, op.bytes - op.done};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else if (op.header_done < kHeaderBytes) {
      n = ::recv(fd, op.header + op.header_done, kHeaderBytes - op.header_done, MSG_DONTWAIT);
    } else {
      n = ::recv(fd, op.data + op.done, op.bytes - op.done, MSG_DONTWAIT);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      const int err = errno;
      fail(p,
           str(op.sending ? "sending " : "receiving ", op.bytes, " bytes failed after ", op.done,
               ": ", tcp::errno_string(err),
               connection_broke(err) ? str(" (the connection broke: rank ", p.rank,
                                           " exited, or the network between the two ranks failed)")
                                     : std::string()),
           connection_broke(err) ? PeerFault::kReset : PeerFault::kUnknown);
    }
    if (n == 0 && !op.sending)
      fail(p,
           str("rank ", p.rank, " closed the connection while rank ", rank_, " was receiving ",
               op.bytes, " bytes (", op.done, " arrived): it exited or closed its transport"),
           PeerFault::kClosed);
    auto got = static_cast<std::size_t>(n);
    std::size_t to_header = std::min(got, kHeaderBytes - op.header_done);
    op.header_done += to_header;
    op.done += got - to_header;  // receives never straddle; sends may
    if (!op.sending && op.header_done == kHeaderBytes && got == to_header) {
      // The header just completed: check it before touching the payload.
      const frame::Header h = frame::decode(op.header);
      const std::string wrong =
          frame::mismatch(h, h.magic == frame::kMagic, p.rank, rank_, p.recv_seq, op.bytes);
      if (!wrong.empty()) fail(p, wrong, PeerFault::kUnknown);
    }
    if (op.header_done == kHeaderBytes && op.done == op.bytes) {
      op.finished = true;
      ++(op.sending ? p.send_seq : p.recv_seq);
    }
  }
  return true;
}

// Note [Spin, then sleep]. The budget is a few wake-ups long: long enough
// to catch a reply that is already on its way, short enough that a peer
// still computing costs this rank little CPU before it sleeps in poll().
namespace {
constexpr std::size_t kSpinBytes = 64 * 1024;
constexpr auto kSpinFor = std::chrono::microseconds(50);

PeerLink tcp_link(TcpTransport::Op& op) {
  return {op.peer->rank, op.peer->broken, op.peer->broken_fault};
}
}  // namespace

void TcpTransport::run(Op* ops, int count, Deadline deadline) {
  const auto start = Clock::now();
  std::size_t total = 0;
  for (int i = 0; i < count; ++i) total += ops[i].bytes;
  const auto spin_until = total <= kSpinBytes ? start + kSpinFor : start;
  refuse_broken_links(ops, count, tcp_link);
  while (true) {
    if (abort_.aborted())
      throw AbortedError(str("rank ", rank_, ": communication aborted: ", abort_.reason()));
    bool all = true;
    for (int i = 0; i < count; ++i) all = advance(ops[i]) && all;
    if (all) return;

    const auto now = Clock::now();
    if (now >= deadline) {
      throw_frames_timed_out(rank_, now - start, ops, count, tcp_link);
    }
    if (now < spin_until) {
      cpu_relax();
      continue;
    }
    pollfd pfds[3];
    int n = 0;
    for (int i = 0; i < count; ++i) {
      if (ops[i].finished) continue;
      short ev = ops[i].sending ? POLLOUT : POLLIN;
      if (n > 0 && pfds[n - 1].fd == ops[i].peer->fd.get())
        pfds[n - 1].events |= ev;
      else
        pfds[n++] = {ops[i].peer->fd.get(), ev, 0};
    }
    pfds[n++] = {abort_.fd(), POLLIN, 0};
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    if (::poll(pfds, static_cast<nfds_t>(n), static_cast<int>(std::min<int64_t>(ms, 60'000))) < 0 &&
        errno != EINTR)
      throw CommError(str("rank ", rank_, ": poll failed: ", tcp::errno_string(errno)));
  }
}

}  // namespace mddp::comm
