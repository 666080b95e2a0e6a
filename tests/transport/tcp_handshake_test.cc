// The TCP handshake refuses strangers (no key, a replayed confirm, another job,
// an earlier attempt, another version, garbage bytes, silence) with a logged reason, while the real
// ranks still connect and exchange; plus the handshake codec on its own.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <mutex>
#include <sstream>

#include "core/comm/memory_store.h"
#include "core/comm/transport/tcp/handshake.h"
#include "core/comm/transport/tcp/socket.h"
#include "core/common/hmac.h"
#include "support/ranks.h"
#include "transport_fixture.h"

namespace mddp::comm::test {
namespace {

using mddp::test::run_threads;
using tcp::Fd;

// Captures what the transport logs while alive; restores the previous logger.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(os_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // Call once the logging threads have been joined.
  std::string text() {
    spdlog::default_logger()->flush();
    return os_.str();
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream os_;
};

// Connects to addr (blocking, bounded by poll).
Fd dial(const std::string& addr) {
  auto [host, port] = tcp::split_host_port(addr);
  Fd fd = tcp::start_connect(host, port);
  pollfd p{fd.get(), POLLOUT, 0};
  EXPECT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_EQ(tcp::connect_error(fd.get()), 0);
  return fd;
}

void send_all(const Fd& fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    pollfd p{fd.get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1);
    ssize_t n = ::send(fd.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    done += static_cast<std::size_t>(n);
  }
}

// True when the other end closes without sending anything, within 10 s.
bool closed_without_answer(const Fd& fd) {
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, 10'000) != 1) return false;
  char c;
  ssize_t n = ::recv(fd.get(), &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// Reads exactly `n` bytes (bounded by poll); "" if the other end closed first.
std::string read_exactly(const Fd& fd, std::size_t n) {
  std::string out;
  while (out.size() < n) {
    pollfd p{fd.get(), POLLIN, 0};
    char buf[256];
    const ssize_t got = ::poll(&p, 1, 10'000) == 1
                            ? ::recv(fd.get(), buf, std::min(sizeof buf, n - out.size()), 0)
                            : 0;
    if (got <= 0) {  // nothing within 10 s, or closed: "" (one return: gcc 12 misreads two)
      out.clear();
      break;
    }
    out.append(buf, static_cast<std::size_t>(got));
  }
  return out;
}

const JobIdentity kJob{"test-job", 2, "s3cret-key"};  // attempt 2: attempts 0 and 1 came before

tcp::Hello hello_from(int rank, int size, int target, int attempt, std::string job) {
  return {tcp::kProtocolVersion,
          rank,
          size,
          target,
          attempt,
          std::move(job),
          random_bytes(tcp::kHandshakeNonceBytes)};
}

// Sends `h` and reads the challenge: what a peer sees before it must prove itself.
tcp::Challenge challenged(const Fd& fd, const tcp::Hello& h, int size) {
  send_all(fd, tcp::encode_hello(h));
  const std::string bytes = read_exactly(fd, tcp::kChallengeBytes);
  tcp::Challenge c;
  EXPECT_EQ(bytes.size(), tcp::kChallengeBytes) << "no challenge came back";
  if (bytes.size() == tcp::kChallengeBytes) {
    EXPECT_EQ(
        tcp::decode_challenge(reinterpret_cast<const uint8_t*>(bytes.data()), h.target, size, c),
        "");
  }
  return c;
}

TEST(TcpHandshakeTest, StrangersAreRefusedAndTheJobGoesOn) {
  LogCapture log;
  MemoryStore store;
  std::promise<void> strangers_done;
  auto strangers_done_f = strangers_done.get_future().share();
  Fd silent;
  run_threads(
      4,
      [&](int rank) {
        if (rank ==
            3) {  // not a rank: the strangers, all knocking on rank 0 before ranks 1 and 2 start
          const std::string addr = store.get("comm/addr/0", 30s);
          tcp::Hello old_build = hello_from(1, 3, 0, 2, "test-job");
          old_build.version = 1;
          for (const auto& bytes :
               {tcp::encode_hello(hello_from(1, 3, 0, 2, "other-job")),
                tcp::encode_hello(hello_from(1, 3, 0, 1, "test-job")),  // a late peer of attempt 1
                tcp::encode_hello(old_build), tcp::encode_hello(hello_from(0, 3, 0, 2, "test-job")),
                std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("\xff\xff\xff")}) {
            Fd fd = dial(addr);
            send_all(fd, bytes);
            if (bytes.size() > 3) {
              EXPECT_TRUE(closed_without_answer(fd)) << "not refused: " << bytes.size() << " bytes";
            }
          }
          // Right claims, but no key: its confirm is a guess.
          {
            Fd fd = dial(addr);
            const tcp::Hello h = hello_from(1, 3, 0, 2, "test-job");
            const tcp::Challenge c = challenged(fd, h, 3);
            send_all(fd, tcp::encode_confirm(tcp::handshake_mac("guess", "connect", h, c.nonce)));
            EXPECT_TRUE(closed_without_answer(fd)) << "a confirm made with the wrong key was taken";
          }
          // A confirm recorded from another connection (the key's holder
          // answered another nonce): useless here, the acceptor's nonce differs.
          {
            Fd first = dial(addr), second = dial(addr);
            const tcp::Hello h1 = hello_from(1, 3, 0, 2, "test-job"),
                             h2 = hello_from(1, 3, 0, 2, "test-job");
            const tcp::Challenge c1 = challenged(first, h1, 3);
            challenged(second, h2, 3);
            send_all(second,
                     tcp::encode_confirm(tcp::handshake_mac(kJob.key, "connect", h1, c1.nonce)));
            EXPECT_TRUE(closed_without_answer(second)) << "a replayed confirm was taken";
          }
          silent = dial(addr);  // says nothing; must not stop the real ranks
          strangers_done.set_value();
          return;
        }
        if (rank != 0) {
          ASSERT_EQ(strangers_done_f.wait_for(30s), std::future_status::ready);
        }
        auto t = connect_transport(store, rank, 3, kJob, TransportKind::kTcp, 30s);
        for (int k = 1; k < 3; ++k) {
          int to = (rank + k) % 3, from = (rank - k + 3) % 3;
          auto out = pattern(rank, to, 1000);
          std::vector<uint8_t> got(1000);
          t->send_recv(to, out.data(), out.size(), from, got.data(), got.size(), in(30s));
          EXPECT_TRUE(same_bytes(got, pattern(from, rank, 1000)));
        }
      },
      60s);
  EXPECT_TRUE(closed_without_answer(silent))
      << "the silent stranger was not dropped once the mesh was up";
  const std::string text = log.text();
  for (const char* reason :
       {"job id 'other-job'", "it is of attempt 1, this is attempt 2 (a late peer",
        "protocol version 1", "claims rank 0", "bad magic",
        "could not prove it holds the attempt's key", "did not complete the handshake"})
    EXPECT_TRUE(contains(text, reason)) << "log lacks '" << reason << "':\n" << text;
}

TEST(TcpHandshakeTest, AListenerWithoutTheKeyIsRefusedByTheConnector) {
  LogCapture log;
  MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        JobIdentity job{"test-job", 0, rank == 0 ? "key-a" : "key-b"};
        try {
          connect_transport(store, rank, 2, job, TransportKind::kTcp, rank == 0 ? 1s : 10s);
          ADD_FAILURE() << "rank " << rank << " connected with a different key";
        } catch (const PeerError& e) {
          EXPECT_EQ(rank, 1);
          EXPECT_TRUE(contains(e.what(), "could not prove it is rank 0")) << e.what();
          EXPECT_TRUE(contains(e.what(), "wrong key")) << e.what();
        } catch (const TimeoutError& e) {
          EXPECT_EQ(rank, 0);
          EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
        }
      },
      60s);
}

TEST(TcpHandshakeTest, ARankOfAnEarlierAttemptGetsAnActionableError) {
  LogCapture log;
  MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        JobIdentity job{"test-job", rank == 0 ? 1 : 0, "same-key"};
        try {
          connect_transport(store, rank, 2, job, TransportKind::kTcp, rank == 0 ? 1s : 10s);
          ADD_FAILURE() << "rank " << rank << " connected across attempts";
        } catch (const PeerError& e) {
          EXPECT_EQ(rank, 1);
          EXPECT_TRUE(contains(e.what(), "refused us")) << e.what();
          EXPECT_TRUE(contains(e.what(), "attempt")) << e.what();
        } catch (const TimeoutError& e) {
          EXPECT_EQ(rank, 0);
        }
      },
      60s);
  EXPECT_TRUE(contains(log.text(), "it is of attempt 0, this is attempt 1")) << log.text();
}

TEST(TcpHandshakeTest, CodecRoundTripsAndRejectsGarbage) {
  const tcp::Hello h = hello_from(5, 8, 2, 3, "job");
  std::string bytes = tcp::encode_hello(h);
  EXPECT_EQ(bytes.size(), tcp::kHelloFixedBytes + 3);
  EXPECT_LE(bytes.size(), tcp::kMaxHandshakeBytes);
  std::string why;
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_EQ(tcp::hello_bytes_needed(p, 3, why), tcp::kHelloFixedBytes);
  EXPECT_EQ(tcp::hello_bytes_needed(p, bytes.size(), why), bytes.size());
  tcp::Hello back = tcp::decode_hello(p, bytes.size());
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.size, 8);
  EXPECT_EQ(back.target, 2);
  EXPECT_EQ(back.attempt, 3);
  EXPECT_EQ(back.job_id, "job");
  EXPECT_EQ(back.nonce, h.nonce);
  EXPECT_EQ(tcp::check_hello(back, {"job", 3, "k"}, 2, 8), "");
  EXPECT_NE(tcp::check_hello(back, {"job", 3, "k"}, 2, 9), "");
  EXPECT_NE(tcp::check_hello(back, {"job", 4, "k"}, 2, 8), "");
  EXPECT_NE(tcp::check_hello(back, {"jab", 3, "k"}, 2, 8), "");
  // Each MAC binds the role, the key and both nonces.
  const std::string na = random_bytes(tcp::kHandshakeNonceBytes);
  const std::string accept = tcp::handshake_mac("k", "accept", h, na);
  EXPECT_EQ(accept.size(), tcp::kHandshakeMacBytes);
  EXPECT_NE(accept, tcp::handshake_mac("k", "connect", h, na));
  EXPECT_NE(accept, tcp::handshake_mac("k2", "accept", h, na));
  EXPECT_NE(accept, tcp::handshake_mac("k", "accept", h, random_bytes(tcp::kHandshakeNonceBytes)));
  tcp::Challenge c;
  const std::string challenge = tcp::encode_challenge({2, 8, na, accept});
  EXPECT_EQ(tcp::decode_challenge(reinterpret_cast<const uint8_t*>(challenge.data()), 2, 8, c), "");
  EXPECT_EQ(c.mac, accept);
  EXPECT_NE(tcp::decode_challenge(reinterpret_cast<const uint8_t*>(challenge.data()), 3, 8, c), "");
  std::string mac;
  const std::string confirm = tcp::encode_confirm(accept);
  EXPECT_EQ(tcp::decode_confirm(reinterpret_cast<const uint8_t*>(confirm.data()), mac), "");
  EXPECT_EQ(mac, accept);
  EXPECT_NE(tcp::decode_confirm(reinterpret_cast<const uint8_t*>(challenge.data()), mac), "");
  bytes[25] = '\x7f';  // job length 0x7f03: over the limit
  EXPECT_EQ(tcp::hello_bytes_needed(p, bytes.size(), why), 0u);
  EXPECT_TRUE(contains(why, "longer than")) << why;
}

}  // namespace
}  // namespace mddp::comm::test
