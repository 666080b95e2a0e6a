// The TCP handshake refuses strangers (wrong token, wrong job, wrong version,
// garbage bytes, silence) with a logged reason, while the real ranks still
// connect and exchange; plus the handshake codec on its own.
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

TEST(TcpHandshakeTest, StrangersAreRefusedAndTheJobGoesOn) {
  LogCapture log;
  MemoryStore store;
  std::promise<void> strangers_done;
  auto strangers_done_f = strangers_done.get_future().share();
  Fd silent;
  run_threads(
      4,
      [&](int rank) {
        if (rank == 3) {  // not a rank: the strangers, all knocking on rank 0 before ranks 1 and 2 start
          const std::string addr = store.get("comm/addr/0", 30s);
          tcp::Hello wrong_token{tcp::kProtocolVersion, 1, 3, 0, "test-job", "guess"};
          tcp::Hello wrong_job{tcp::kProtocolVersion, 1, 3, 0, "other-job", "s3cret-token"};
          tcp::Hello old_build{7, 1, 3, 0, "test-job", "s3cret-token"};
          tcp::Hello wrong_rank{tcp::kProtocolVersion, 0, 3, 0, "test-job", "s3cret-token"};
          for (const auto& bytes : {tcp::encode_hello(wrong_token), tcp::encode_hello(wrong_job),
                                    tcp::encode_hello(old_build), tcp::encode_hello(wrong_rank),
                                    std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("\xff\xff\xff")}) {
            Fd fd = dial(addr);
            send_all(fd, bytes);
            if (bytes.size() > 3) {
              EXPECT_TRUE(closed_without_answer(fd)) << "not refused: " << bytes.size() << " bytes";
            }
          }
          silent = dial(addr);  // says nothing; must not stop the real ranks
          strangers_done.set_value();
          return;
        }
        if (rank != 0) {
          ASSERT_EQ(strangers_done_f.wait_for(30s), std::future_status::ready);
        }
        auto t = connect_rank(store, rank, 3, TransportKind::kTcp);
        for (int k = 1; k < 3; ++k) {
          int to = (rank + k) % 3, from = (rank - k + 3) % 3;
          auto out = pattern(rank, to, 1000);
          std::vector<uint8_t> got(1000);
          t->send_recv(to, out.data(), out.size(), from, got.data(), got.size(), in(30s));
          EXPECT_TRUE(same_bytes(got, pattern(from, rank, 1000)));
        }
      },
      60s);
  EXPECT_TRUE(closed_without_answer(silent)) << "the silent stranger was not dropped once the mesh was up";
  const std::string text = log.text();
  for (const char* reason : {"wrong token", "job id 'other-job'", "protocol version 7", "claims rank 0",
                             "bad magic", "did not complete the handshake"})
    EXPECT_TRUE(contains(text, reason)) << "log lacks '" << reason << "':\n" << text;
}

TEST(TcpHandshakeTest, ARefusedRankGetsAnActionableError) {
  LogCapture log;
  MemoryStore store;
  run_threads(
      2,
      [&](int rank) {
        JobIdentity job{"test-job", rank == 0 ? "token-a" : "token-b"};
        try {
          connect_transport(store, rank, 2, job, TransportKind::kTcp, rank == 0 ? 1s : 10s);
          ADD_FAILURE() << "rank " << rank << " connected with a different token";
        } catch (const PeerError& e) {
          EXPECT_EQ(rank, 1);
          EXPECT_TRUE(contains(e.what(), "refused")) << e.what();
          EXPECT_TRUE(contains(e.what(), "token")) << e.what();
        } catch (const TimeoutError& e) {
          EXPECT_EQ(rank, 0);
          EXPECT_TRUE(contains(e.what(), "rank 1 (it never connected to us)")) << e.what();
        }
      },
      60s);
}

TEST(TcpHandshakeTest, CodecRoundTripsAndRejectsGarbage) {
  tcp::Hello h{tcp::kProtocolVersion, 5, 8, 2, "job", "tok"};
  std::string bytes = tcp::encode_hello(h);
  std::string why;
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_EQ(tcp::hello_bytes_needed(p, 3, why), tcp::kHelloFixedBytes);
  EXPECT_EQ(tcp::hello_bytes_needed(p, bytes.size(), why), bytes.size());
  tcp::Hello back = tcp::decode_hello(p, bytes.size());
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.size, 8);
  EXPECT_EQ(back.target, 2);
  EXPECT_EQ(back.job_id, "job");
  EXPECT_EQ(back.token, "tok");
  EXPECT_EQ(tcp::check_hello(back, "job", "tok", 2, 8), "");
  EXPECT_NE(tcp::check_hello(back, "job", "tok", 2, 9), "");
  EXPECT_NE(tcp::check_hello(back, "job", "to", 2, 8), "");
  bytes[21] = '\x7f';  // job length 0x7f03: over the limit
  EXPECT_EQ(tcp::hello_bytes_needed(p, bytes.size(), why), 0u);
  EXPECT_TRUE(contains(why, "longer than")) << why;
  EXPECT_TRUE(tcp::constant_time_equal("abc", "abc"));
  EXPECT_FALSE(tcp::constant_time_equal("abc", "abd"));
  EXPECT_FALSE(tcp::constant_time_equal("abc", std::string_view("abc\0", 4)));
  EXPECT_FALSE(tcp::constant_time_equal("", "a"));
}

}  // namespace
}  // namespace mddp::comm::test
