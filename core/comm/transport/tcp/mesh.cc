#include "core/comm/transport/tcp/mesh.h"

#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "core/comm/transport/tcp/handshake.h"
#include "core/common/hmac.h"

namespace mddp::comm::tcp {
namespace {

using std::chrono::milliseconds;

// Bound on half-open strangers held at once, so a flood cannot exhaust fds.
constexpr std::size_t kMaxPendingIncoming = 64;

// Our connection to a lower rank: connect, send the hello, read and check
// the challenge, send the confirm (handshake.h).
struct Outgoing {
  int peer = 0;
  std::string host;
  int port = 0;
  Fd fd;
  enum {
    kIdle,
    kConnecting,
    kSendingHello,
    kReadingChallenge,
    kSendingConfirm,
    kDone
  } state = kIdle;
  Clock::time_point retry_at{};
  Hello hello;
  std::string out;
  std::size_t sent = 0;
  uint8_t in[kChallengeBytes] = {};
  std::size_t got = 0;
};

// A connection accepted from someone claiming to be a higher rank: read
// its hello, send our challenge, read and check its confirm.
struct Incoming {
  Fd fd;
  std::string from;
  std::vector<uint8_t> in = std::vector<uint8_t>(kHelloFixedBytes);
  std::size_t got = 0;
  enum { kReadingHello, kSendingChallenge, kReadingConfirm } state = kReadingHello;
  Hello hello;
  std::string nonce;  // ours (nonce_a)
  std::string out;    // the challenge
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

// Reads into `buf` until `want` bytes are in without blocking: false and
// `why` set when the peer closed or the read failed.
bool fill(int fd, uint8_t* buf, std::size_t want, std::size_t& got, std::string& why) {
  const ssize_t n = read_some(fd, buf + got, want - got);
  if (n >= 0) {
    got += static_cast<std::size_t>(n);
    return true;
  }
  why = n == -1 ? "it closed the connection before completing the handshake" : errno_string(errno);
  return false;
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
  Mesh(int rank, int size, const JobIdentity& job, Deadline deadline, const AbortSignal* abort)
      : rank_(rank),
        size_(size),
        job_(job),
        deadline_(deadline),
        abort_(abort),
        start_(Clock::now()),
        fds_(size) {}

  std::vector<Fd> run(Store& store, const std::string& bind_host, const std::string& prefix);

 private:
  void step_outgoing(Outgoing& o);
  void accept_new();
  // False when the connection is finished with (refused or handed over).
  bool step_incoming(Incoming& c);
  void refuse(Incoming& c, const std::string& why);
  [[noreturn]] void time_out();
  void throw_if_aborted() const;

  int rank_, size_;
  const JobIdentity& job_;
  Deadline deadline_;
  const AbortSignal* abort_;  // nullptr: none
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
      throw TimeoutError(str("rank ", rank_, ": rank ", j,
                             " never published its data-plane address (", e.what(),
                             "); did it start?"));
    }
    Outgoing o;
    o.peer = j;
    std::tie(o.host, o.port) = split_host_port(addr);
    o.hello = Hello{kProtocolVersion,
                    rank_,
                    size_,
                    j,
                    job_.attempt,
                    job_.job_id,
                    random_bytes(kHandshakeNonceBytes)};
    o.out = encode_hello(o.hello);
    outgoing_.push_back(std::move(o));
  }

  while (true) {
    bool outgoing_done = true;
    for (auto& o : outgoing_) {
      if (o.state == Outgoing::kIdle && Clock::now() >= o.retry_at) step_outgoing(o);
      outgoing_done = outgoing_done && o.state == Outgoing::kDone;
    }
    if (outgoing_done && accepted_ == size_ - 1 - rank_) break;
    throw_if_aborted();
    if (Clock::now() >= deadline_) time_out();

    std::vector<pollfd> pfds;
    auto poll_timeout = deadline_ - Clock::now();
    if (abort_) pfds.push_back({abort_->fd(), POLLIN, 0});  // wakes the poll on abort
    if (accepted_ < size_ - 1 - rank_) pfds.push_back({listener_.get(), POLLIN, 0});
    for (auto& o : outgoing_) {
      if (o.state == Outgoing::kConnecting || o.state == Outgoing::kSendingHello ||
          o.state == Outgoing::kSendingConfirm)
        pfds.push_back({o.fd.get(), POLLOUT, 0});
      if (o.state == Outgoing::kReadingChallenge) pfds.push_back({o.fd.get(), POLLIN, 0});
      if (o.state == Outgoing::kIdle)
        poll_timeout = std::min(poll_timeout, o.retry_at - Clock::now());
    }
    for (auto& c : incoming_)
      pfds.push_back({c.fd.get(),
                      static_cast<short>(c.state == Incoming::kSendingChallenge ? POLLOUT : POLLIN),
                      0});
    auto ms =
        std::chrono::ceil<milliseconds>(std::max(poll_timeout, Clock::duration::zero())).count();
    int n = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (n < 0 && errno != EINTR)
      throw CommError(str("rank ", rank_, ": poll failed: ", errno_string(errno)));
    // Each state handler tries its socket without blocking, so stepping all is correct (if not
    // minimal).
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
      spdlog::debug("rank {}: connect to rank {} at {}: {}; retrying", rank_, o.peer,
                    join_host_port(o.host, o.port), errno_string(err));
      o.fd.reset();
      o.state = Outgoing::kIdle;
      o.retry_at = Clock::now() + milliseconds(50);
      return;
    }
    tune_data_socket(o.fd.get());
    o.state = Outgoing::kSendingHello;
  }
  const auto send = [&](decltype(o.state) next) {
    ssize_t n = write_some(o.fd.get(), o.out, o.sent);
    if (n < 0)
      throw PeerError(str("rank ", rank_, ": sending the handshake to rank ", o.peer,
                          " failed: ", errno_string(errno)));
    o.sent += static_cast<std::size_t>(n);
    if (o.sent == o.out.size()) o.state = next;
  };
  if (o.state == Outgoing::kSendingHello) send(Outgoing::kReadingChallenge);
  if (o.state == Outgoing::kReadingChallenge) {
    std::string why;
    if (!fill(o.fd.get(), o.in, kChallengeBytes, o.got, why))
      throw PeerError(str(
          "rank ", rank_, ": rank ", o.peer, " at ", join_host_port(o.host, o.port),
          " closed the connection during the handshake: it refused us. Do all ranks use the same "
          "job id, token, attempt and microddp build? See rank ",
          o.peer, "'s log for the reason"));
    if (o.got < kChallengeBytes) return;
    Challenge c;
    if (std::string bad = decode_challenge(o.in, o.peer, size_, c); !bad.empty())
      throw PeerError(str("rank ", rank_, ": bad handshake answer from ",
                          join_host_port(o.host, o.port), ": ", bad));
    // The listener proves it holds this attempt's key; then we do.
    if (!constant_time_equal(c.mac, handshake_mac(job_.key, "accept", o.hello, c.nonce)))
      throw PeerError(str("rank ", rank_, ": the listener at ", join_host_port(o.host, o.port),
                          " could not prove it is rank ", o.peer, " of attempt ", job_.attempt,
                          " of job '", job_.job_id,
                          "' (wrong key): a stale address in the store, or an impostor"));
    o.out = encode_confirm(handshake_mac(job_.key, "connect", o.hello, c.nonce));
    o.sent = 0;
    o.state = Outgoing::kSendingConfirm;
  }
  if (o.state == Outgoing::kSendingConfirm) send(Outgoing::kDone);
  if (o.state == Outgoing::kDone) fds_[static_cast<std::size_t>(o.peer)] = std::move(o.fd);
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
  std::string why;
  if (c.state == Incoming::kReadingHello) {
    if (!fill(c.fd.get(), c.in.data(), c.in.size(), c.got, why)) {
      refuse(c, why);
      return false;
    }
    std::size_t need = hello_bytes_needed(c.in.data(), c.got, why);
    if (need == 0) {
      refuse(c, why);
      return false;
    }
    if (need > c.in.size()) c.in.resize(need);
    if (c.got < need) return true;
    c.hello = decode_hello(c.in.data(), need);
    why = check_hello(c.hello, job_, rank_, size_);
    if (why.empty() && fds_[static_cast<std::size_t>(c.hello.rank)].valid())
      why = str("rank ", c.hello.rank, " is already connected");
    if (!why.empty()) {
      refuse(c, why);
      return false;
    }
    c.nonce = random_bytes(kHandshakeNonceBytes);
    c.out = encode_challenge(
        {rank_, size_, c.nonce, handshake_mac(job_.key, "accept", c.hello, c.nonce)});
    c.state = Incoming::kSendingChallenge;
  }
  if (c.state == Incoming::kSendingChallenge) {
    ssize_t n = write_some(c.fd.get(), c.out, c.sent);
    if (n < 0) {
      refuse(c, str("sending the challenge failed: ", errno_string(errno)));
      return false;
    }
    c.sent += static_cast<std::size_t>(n);
    if (c.sent < c.out.size()) return true;
    c.in.assign(kConfirmBytes, 0);
    c.got = 0;
    c.state = Incoming::kReadingConfirm;
  }
  if (!fill(c.fd.get(), c.in.data(), kConfirmBytes, c.got, why)) {
    refuse(c, why);
    return false;
  }
  if (c.got < kConfirmBytes) return true;
  std::string mac;
  if (why = decode_confirm(c.in.data(), mac); !why.empty()) {
    refuse(c, why);
    return false;
  }
  if (!constant_time_equal(mac, handshake_mac(job_.key, "connect", c.hello, c.nonce))) {
    refuse(
        c,
        str("it claims rank ", c.hello.rank, " of attempt ", c.hello.attempt,
            " but could not prove it holds the attempt's key (a stranger, another job's rank, or a "
            "rank of an earlier attempt)"));
    return false;
  }
  tune_data_socket(c.fd.get());
  fds_[static_cast<std::size_t>(c.hello.rank)] = std::move(c.fd);
  ++accepted_;
  return false;
}

void Mesh::refuse(Incoming& c, const std::string& why) {
  spdlog::error("rank {}: refused a data-plane connection from {}: {}", rank_, c.from, why);
  c.fd.reset();
}

void Mesh::throw_if_aborted() const {
  if (abort_ && abort_->aborted())
    throw AbortedError(
        str("rank ", rank_, ": connecting the data plane stopped: ", abort_->reason()));
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
  throw TimeoutError(str("rank ", rank_, ": timed out after ", ms,
                         " ms connecting the data plane; still waiting for ", missing,
                         ". Did every rank start, with the same job id and token?"));
}

}  // namespace

std::vector<Fd> connect_mesh(Store& store, int rank, int size, const JobIdentity& job,
                             Deadline deadline, const std::string& bind_host,
                             const std::string& prefix, const AbortSignal* abort) {
  MDDP_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " of ", size);
  Mesh mesh(rank, size, job, deadline, abort);
  return mesh.run(store, bind_host, prefix);
}

}  // namespace mddp::comm::tcp
