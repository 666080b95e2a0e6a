#include "core/comm/transport/tcp/mesh.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <spdlog/spdlog.h>

#include "core/comm/transport/tcp/handshake.h"

namespace mddp::comm::tcp {
namespace {

using std::chrono::milliseconds;

// Bound on half-open strangers held at once, so a flood cannot exhaust fds.
constexpr std::size_t kMaxPendingIncoming = 64;

// Our connection to a lower rank: connect, send the hello, read the accept.
struct Outgoing {
  int peer = 0;
  std::string host;
  int port = 0;
  Fd fd;
  enum { kIdle, kConnecting, kSending, kReading, kDone } state = kIdle;
  Clock::time_point retry_at{};
  std::string out;
  std::size_t sent = 0;
  uint8_t in[kAcceptBytes] = {};
  std::size_t got = 0;
};

// A connection accepted from someone claiming to be a higher rank.
struct Incoming {
  Fd fd;
  std::string from;
  std::vector<uint8_t> in = std::vector<uint8_t>(kHelloFixedBytes);
  std::size_t got = 0;
  int rank = -1;
  std::string out;  // the accept, once the hello checked out
  std::size_t sent = 0;
};

// Reads up to `want` bytes without blocking: the count read (0 when nothing
// is there now), -1 on EOF, -2 on error (errno kept).
ssize_t read_some(int fd, uint8_t* p, std::size_t want) {
  while (true) {
    ssize_t n = ::recv(fd, p, want, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -2;
  }
}

// Writes s[from..] without blocking: the count written, or -2 on error.
ssize_t write_some(int fd, const std::string& s, std::size_t from) {
  while (true) {
    ssize_t n = ::send(fd, s.data() + from, s.size() - from, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -2;
  }
}

class Mesh {
 public:
  Mesh(int rank, int size, const JobIdentity& job, Deadline deadline)
      : rank_(rank), size_(size), job_(job), deadline_(deadline), start_(Clock::now()), fds_(size) {}

  std::vector<Fd> run(Store& store, const std::string& bind_host, const std::string& prefix);

 private:
  void step_outgoing(Outgoing& o);
  void accept_new();
  // False when the connection is finished with (refused or handed over).
  bool step_incoming(Incoming& c);
  void refuse(Incoming& c, const std::string& why);
  [[noreturn]] void time_out();

  int rank_, size_;
  const JobIdentity& job_;
  Deadline deadline_;
  Clock::time_point start_;
  Fd listener_;
  std::vector<Outgoing> outgoing_;
  std::vector<Incoming> incoming_;
  std::vector<Fd> fds_;
  int accepted_ = 0;
};

std::vector<Fd> Mesh::run(Store& store, const std::string& bind_host, const std::string& prefix) {
  auto [listener, port] = listen_ephemeral(bind_host);
  listener_ = std::move(listener);
  std::string host = bind_host;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    host = name;
  }
  store.set(str(prefix, "/addr/", rank_), join_host_port(host, port));
  for (int j = 0; j < rank_; ++j) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
    std::string addr;
    try {
      addr = store.get(str(prefix, "/addr/", j), std::max(left, milliseconds(0)));
    } catch (const TimeoutError& e) {
      throw TimeoutError(str("rank ", rank_, ": rank ", j, " never published its data-plane address (", e.what(),
                             "); did it start?"));
    }
    Outgoing o;
    o.peer = j;
    std::tie(o.host, o.port) = split_host_port(addr);
    o.out = encode_hello({kProtocolVersion, rank_, size_, j, job_.job_id, job_.token});
    outgoing_.push_back(std::move(o));
  }

  while (true) {
    bool outgoing_done = true;
    for (auto& o : outgoing_) {
      if (o.state == Outgoing::kIdle && Clock::now() >= o.retry_at) step_outgoing(o);
      outgoing_done = outgoing_done && o.state == Outgoing::kDone;
    }
    if (outgoing_done && accepted_ == size_ - 1 - rank_) break;
    if (Clock::now() >= deadline_) time_out();

    std::vector<pollfd> pfds;
    auto poll_timeout = deadline_ - Clock::now();
    if (accepted_ < size_ - 1 - rank_) pfds.push_back({listener_.get(), POLLIN, 0});
    for (auto& o : outgoing_) {
      if (o.state == Outgoing::kConnecting || o.state == Outgoing::kSending) pfds.push_back({o.fd.get(), POLLOUT, 0});
      if (o.state == Outgoing::kReading) pfds.push_back({o.fd.get(), POLLIN, 0});
      if (o.state == Outgoing::kIdle) poll_timeout = std::min(poll_timeout, o.retry_at - Clock::now());
    }
    for (auto& c : incoming_) pfds.push_back({c.fd.get(), static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    auto ms = std::chrono::ceil<milliseconds>(std::max(poll_timeout, Clock::duration::zero())).count();
    int n = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (n < 0 && errno != EINTR) throw CommError(str("rank ", rank_, ": poll failed: ", errno_string(errno)));
    // Each state handler tries its socket without blocking, so stepping all is correct (if not minimal).
    for (auto& o : outgoing_)
      if (o.state != Outgoing::kIdle && o.state != Outgoing::kDone) step_outgoing(o);
    if (accepted_ < size_ - 1 - rank_) accept_new();
    std::erase_if(incoming_, [&](Incoming& c) { return !step_incoming(c); });
  }

  for (auto& c : incoming_)
    refuse(c, "it did not complete the handshake before all ranks were connected");
  return std::move(fds_);
}

void Mesh::step_outgoing(Outgoing& o) {
  if (o.state == Outgoing::kIdle) {
    o.fd = start_connect(o.host, o.port);
    o.state = Outgoing::kConnecting;
  }
  if (o.state == Outgoing::kConnecting) {
    pollfd p{o.fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0) return;
    if (int err = connect_error(o.fd.get()); err != 0) {
      // The address was published after listen(), so a refusal means the
      // peer is restarting or the address is stale: retry until the deadline.
      spdlog::debug("rank {}: connect to rank {} at {}: {}; retrying", rank_, o.peer, join_host_port(o.host, o.port),
                    errno_string(err));
      o.fd.reset();
      o.state = Outgoing::kIdle;
      o.retry_at = Clock::now() + milliseconds(50);
      return;
    }
    tune_data_socket(o.fd.get());
    o.state = Outgoing::kSending;
  }
  if (o.state == Outgoing::kSending) {
    ssize_t n = write_some(o.fd.get(), o.out, o.sent);
    if (n < 0)
      throw PeerError(str("rank ", rank_, ": sending the handshake to rank ", o.peer, " failed: ",
                          errno_string(errno)));
    o.sent += static_cast<std::size_t>(n);
    if (o.sent < o.out.size()) return;
    o.state = Outgoing::kReading;
  }
  if (o.state == Outgoing::kReading) {
    ssize_t n = read_some(o.fd.get(), o.in + o.got, kAcceptBytes - o.got);
    if (n < 0)
      throw PeerError(str("rank ", rank_, ": rank ", o.peer, " at ", join_host_port(o.host, o.port),
                          " closed the connection during the handshake: it refused us. Do all ranks use the same "
                          "job id, token and microddp build? See rank ",
                          o.peer, "'s log for the reason"));
    o.got += static_cast<std::size_t>(n);
    if (o.got < kAcceptBytes) return;
    if (std::string why = check_accept(o.in, o.peer, size_); !why.empty())
      throw PeerError(str("rank ", rank_, ": bad handshake answer from ", join_host_port(o.host, o.port), ": ", why));
    fds_[static_cast<std::size_t>(o.peer)] = std::move(o.fd);
    o.state = Outgoing::kDone;
  }
}

void Mesh::accept_new() {
  while (true) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throw CommError(str("rank ", rank_, ": accept failed: ", errno_string(errno)));
    }
    Incoming c;
    c.fd = Fd(fd);
    c.from = peer_address(fd);
    if (incoming_.size() >= kMaxPendingIncoming) {
      refuse(incoming_.front(), "too many half-open connections");
      incoming_.erase(incoming_.begin());
    }
    incoming_.push_back(std::move(c));
  }
}

bool Mesh::step_incoming(Incoming& c) {
  if (c.out.empty()) {
    ssize_t n = read_some(c.fd.get(), c.in.data() + c.got, c.in.size() - c.got);
    if (n < 0) {
      refuse(c, n == -1 ? "it closed the connection before completing the handshake" : errno_string(errno));
      return false;
    }
    c.got += static_cast<std::size_t>(n);
    std::string why;
    std::size_t need = hello_bytes_needed(c.in.data(), c.got, why);
    if (need == 0) {
      refuse(c, why);
      return false;
    }
    if (need > c.in.size()) c.in.resize(need);
    if (c.got < need) return true;
    Hello h = decode_hello(c.in.data(), need);
    why = check_hello(h, job_.job_id, job_.token, rank_, size_);
    if (why.empty() && fds_[static_cast<std::size_t>(h.rank)].valid())
      why = str("rank ", h.rank, " is already connected");
    if (!why.empty()) {
      refuse(c, why);
      return false;
    }
    c.rank = h.rank;
    c.out = encode_accept(rank_, size_);
  }
  ssize_t n = write_some(c.fd.get(), c.out, c.sent);
  if (n < 0) {
    refuse(c, str("sending the answer failed: ", errno_string(errno)));
    return false;
  }
  c.sent += static_cast<std::size_t>(n);
  if (c.sent < c.out.size()) return true;
  tune_data_socket(c.fd.get());
  fds_[static_cast<std::size_t>(c.rank)] = std::move(c.fd);
  ++accepted_;
  return false;
}

void Mesh::refuse(Incoming& c, const std::string& why) {
  spdlog::error("rank {}: refused a data-plane connection from {}: {}", rank_, c.from, why);
  c.fd.reset();
}

void Mesh::time_out() {
  std::string missing;
  for (auto& o : outgoing_)
    if (o.state != Outgoing::kDone)
      missing += str(missing.empty() ? "" : ", ", "rank ", o.peer, " (we connect to it at ",
                     join_host_port(o.host, o.port), ")");
  for (int j = rank_ + 1; j < size_; ++j)
    if (!fds_[static_cast<std::size_t>(j)].valid())
      missing += str(missing.empty() ? "" : ", ", "rank ", j, " (it never connected to us)");
  auto ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start_).count();
  throw TimeoutError(str("rank ", rank_, ": timed out after ", ms, " ms connecting the data plane; still waiting for ",
                         missing, ". Did every rank start, with the same job id and token?"));
}

}  // namespace

std::vector<Fd> connect_mesh(Store& store, int rank, int size, const JobIdentity& job, Deadline deadline,
                             const std::string& bind_host, const std::string& prefix) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
  Mesh mesh(rank, size, job, deadline);
  return mesh.run(store, bind_host, prefix);
}

}  // namespace mddp::comm::tcp
