// /api/stream over real WebSockets: the first frames, pushed records, and a
// client that never reads must not hold up the others.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "client.h"
#include "fixture.h"

namespace mddp::dashboard::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Reads frames until a metrics frame holds seq `last`; returns every seq seen.
std::vector<uint64_t> read_until_seq(StreamClient& c, uint64_t last) {
  std::vector<uint64_t> seqs;
  while (seqs.empty() || seqs.back() < last) {
    const json f = json::parse(c.read());
    if (f["type"] != "metrics") continue;
    for (const json& r : f["records"]) seqs.push_back(r["seq"].get<uint64_t>());
  }
  return seqs;
}

TEST_F(DashboardTest, StreamSendsJobThenCatchUpThenLiveRecords) {
  feed(0, 3);  // seq 1..6
  std::this_thread::sleep_for(300ms);
  StreamClient c(port());
  const json first = json::parse(c.read());
  EXPECT_EQ(first["type"], "job");
  EXPECT_EQ(first["job"]["world_size"], kWorld);
  EXPECT_EQ(first["ranks"].size(), 2u);
  feed(3, 2);  // seq 7..10, pushed live
  const auto seqs = read_until_seq(c, 10);
  std::vector<uint64_t> want(10);
  std::iota(want.begin(), want.end(), 1);
  EXPECT_EQ(seqs, want);  // none missed, none repeated
}

TEST_F(DashboardTest, StreamSendsJobFramesEverySecond) {
  StreamClient c(port());
  int jobs = 0;
  const auto until = std::chrono::steady_clock::now() + 2500ms;
  while (std::chrono::steady_clock::now() < until)
    if (json::parse(c.read())["type"] == "job") ++jobs;
  EXPECT_GE(jobs, 3);  // on connect, then at 1 s and 2 s
}

// A WebSocket client that completes the handshake and then never reads,
// with a tiny receive buffer so the server's writes to it stall quickly.
int stalled_client(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string upgrade =
      "GET /api/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  EXPECT_EQ(::send(fd, upgrade.data(), upgrade.size(), 0), static_cast<ssize_t>(upgrade.size()));
  return fd;
}

TEST_F(DashboardTest, AClientThatNeverReadsDoesNotBlockTheOthers) {
  const int stalled = stalled_client(port());
  StreamClient good(port());
  uint64_t seq = 0;
  // ~350 bytes a streamed record, 17 MB in all: beyond the stalled client's
  // 4 MiB queue plus the socket buffers (at most 4 MiB more on loopback).
  // The good client keeps up throughout.
  for (int round = 0; round < 50; ++round) {
    feed(round * 500, 500);
    seq += 2 * 500;
    const auto t0 = std::chrono::steady_clock::now();
    read_until_seq(good, seq);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "round " << round;
  }
  // The stalled client was dropped: what it can still read ends in EOF.
  char buf[65536];
  ssize_t n = 1;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (n > 0 && std::chrono::steady_clock::now() < until) {
    pollfd p{stalled, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    n = ::recv(stalled, buf, sizeof buf, 0);
  }
  EXPECT_LE(n, 0) << "the stalled client was not dropped";
  ::close(stalled);
}

TEST_F(DashboardTest, PlainGetOfTheStreamAsksForAnUpgrade) {
  EXPECT_EQ(request(port(), "/api/stream").result_int(), 426);
}

}  // namespace
}  // namespace mddp::dashboard::test
