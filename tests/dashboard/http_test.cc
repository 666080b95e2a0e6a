// The HTTP side of the dashboard server over real sockets: routes, paging,
// refusals (unknown path, traversal, oversized header, body, other methods)
// and many clients at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "client.h"
#include "core/perf/cost_model.h"
#include "dashboard/server/job_json.h"
#include "fixture.h"

namespace mddp::dashboard::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string get_raw(int port, const std::string& target) {
  return raw_exchange(port, "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

TEST_F(DashboardTest, ServesThePageAndTheJob) {
  auto page = request(port(), "/");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_NE(page[http::field::content_type].find("text/html"), std::string::npos);
  feed(0, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a poll folds them in
  const json j = json::parse(request(port(), "/api/job").body());
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["world_size"], kWorld);
  EXPECT_EQ(j["attempt"], 0);
  EXPECT_TRUE(j["restarts"].is_array() && j["restarts"].empty());
  EXPECT_EQ(j["step"], 2);
  EXPECT_EQ(j["total_steps"], 1000);
  EXPECT_TRUE(j["failure"].is_null());
  const json ranks = json::parse(request(port(), "/api/ranks").body());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1]["host"], "host1");
  EXPECT_EQ(ranks[1]["pid"], 1001);
  EXPECT_EQ(ranks[1]["state"], "running");
}

// /api/job's restarts say where each attempt resumed once its first record
// came (the loss chart's markers), and null before.
TEST(JobJson, RestartsSayWhereEachAttemptResumed) {
  JobSnapshot s;
  control::Verdict killed;
  killed.cause = control::Cause::kProcessDied;
  killed.rank = 1;
  killed.host = "host1";
  s.restarts = {{1, killed, 111}, {2, killed, 222}};
  s.resumes = {{.attempt = 1, .from_step = 50, .steps_lost = 7, .superseded = 14}};
  const json j = job_json(s);
  ASSERT_EQ(j["restarts"].size(), 2u);
  EXPECT_EQ(j["restarts"][0]["attempt"], 1);
  EXPECT_EQ(j["restarts"][0]["rank"], 1);
  EXPECT_EQ(j["restarts"][0]["from_step"], 50);
  EXPECT_EQ(j["restarts"][0]["steps_lost"], 7);
  EXPECT_TRUE(j["restarts"][1]["from_step"].is_null()) << "attempt 2 has sent no record yet";
  EXPECT_TRUE(j["restarts"][1]["steps_lost"].is_null());
}

// Each rank's device, threads and CPUs as its worker reported them in a
// heartbeat; before that the device it joined with and nulls. A host whose
// ranks run more compute threads than it has CPUs is flagged on its ranks.
TEST_F(DashboardTest, RanksCarryWhatEachWorkerRunsOn) {
  json ranks = json::parse(request(port(), "/api/ranks").body());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[1]["device"], "cpu");
  EXPECT_TRUE(ranks[1]["threads"].is_null());
  EXPECT_TRUE(ranks[1]["cpus"].is_null());
  EXPECT_EQ(ranks[1]["oversubscribed"], false);
  const auto now = coordinator::Clock::now();
  ASSERT_TRUE(
      job_.heartbeat(sessions_[1], {}, now, control::Resources{"cuda:1", 2, 16}).outcome.ok());
  ASSERT_TRUE(job_.heartbeat(sessions_[0], {}, now, control::Resources{"cpu", 4, 2}).outcome.ok());
  ranks = json::parse(request(port(), "/api/ranks").body());
  EXPECT_EQ(ranks[1]["device"], "cuda:1");
  EXPECT_EQ(ranks[1]["threads"], 2);
  EXPECT_EQ(ranks[1]["cpus"], 16);
  EXPECT_EQ(ranks[1]["oversubscribed"], false);
  EXPECT_EQ(ranks[0]["threads"], 4);
  EXPECT_EQ(ranks[0]["cpus"], 2);
  EXPECT_EQ(ranks[0]["oversubscribed"], true);  // host0: 4 compute threads on 2 CPUs
}

// Each rank's own loss, and the first step it was NaN: the job's loss (a
// mean) turns NaN with the first rank's and cannot say whose it was.
TEST_F(DashboardTest, RanksSayWhoseLossTurnedNonFiniteFirst) {
  feed(1, 4);
  json ranks = json::parse(request(port(), "/api/ranks").body());
  EXPECT_DOUBLE_EQ(ranks[0]["loss"].get<double>(), 2.0 / 5);
  EXPECT_TRUE(ranks[0]["nonfinite_since"].is_null());
  const auto record = [](int64_t step, double loss) {
    control::MetricsRecord r;
    r.metrics.step = step;
    r.metrics.loss = loss;
    return r;
  };
  const double nan = std::nan("");
  job_.metrics(sessions_[1], 0, {record(5, nan), record(6, nan)});
  job_.metrics(sessions_[0], 0, {record(5, 0.3), record(6, nan)});
  ranks = json::parse(request(port(), "/api/ranks").body());
  EXPECT_EQ(ranks[1]["nonfinite_since"], 5);
  EXPECT_EQ(ranks[0]["nonfinite_since"], 6);
  EXPECT_TRUE(ranks[1]["loss"].is_null());
  EXPECT_TRUE(json::parse(request(port(), "/api/job").body())["loss"].is_null());
}

TEST_F(DashboardTest, JobCarriesTheFitOfItsLink) {
  EXPECT_TRUE(json::parse(request(port(), "/api/job").body())["fit"].is_null());
  // The two ranks are on two hosts, so transport auto means tcp; algorithm auto means ring.
  const fs::path file =
      fs::temp_directory_path() / ("mddp-fit-" + std::to_string(::getpid()) + ".json");
  perf::save_fits(file, {{"shm", "ring", kWorld, {1e-6, 10e9}, 0.99},
                         {"tcp", "ring", kWorld, {12e-6, 3e9}, 0.98},
                         {"tcp", "ring", 4, {1, 1}, 0.5},
                         {"tcp", "direct", kWorld, {2e-6, 7e9}, 0.97}});
  ::setenv("MICRODDP_FIT_FILE", file.c_str(), 1);
  serve();  // the fits are read when the server starts
  ::unsetenv("MICRODDP_FIT_FILE");
  fs::remove(file);
  const json fit = json::parse(request(port(), "/api/job").body())["fit"];
  ASSERT_TRUE(fit.is_object()) << fit;
  EXPECT_EQ(fit["transport"], "tcp");
  EXPECT_EQ(fit["algorithm"], "ring");
  EXPECT_EQ(fit["world_size"], kWorld);
  EXPECT_DOUBLE_EQ(fit["alpha_s"].get<double>(), 12e-6);
  EXPECT_DOUBLE_EQ(fit["beta_Bps"].get<double>(), 3e9);

  // A traced step of the direct all-reduce's shape (a reduce-scatter step
  // that only reads): auto ran direct, and the fit shown is its own. (The
  // direct all-reduce needs one host; the tracker goes by the steps.)
  control::MetricsRecord r;
  r.metrics.step = 1;
  r.metrics.buckets = {{0, 1 << 20}};
  r.metrics.buckets[0].steps = {
      {.phase = comm::StepPhase::kReduceScatter, .recv_peer = 1, .recv_block = 0}};
  job_.metrics(sessions_[0], 0, {r});
  EXPECT_EQ(json::parse(request(port(), "/api/job").body())["fit"]["algorithm"], "direct");
}

TEST_F(DashboardTest, UnknownPathIs404) {
  EXPECT_EQ(request(port(), "/nope.html").result_int(), 404);
  EXPECT_EQ(request(port(), "/api/nope").result_int(), 404);
  EXPECT_EQ(request(port(), "/api/timeline").result_int(), 404);  // no step yet
}

TEST_F(DashboardTest, TraversalIsRefused) {
  for (const char* target :
       {"/../etc/passwd", "/%2e%2e/etc/passwd", "/%2E%2e%2Fetc%2Fpasswd", "/a/..%2f..%2fetc/passwd",
        "/a%5c..%5cetc", "/index.html%00.js", "//etc/passwd", "/%zz"})
    EXPECT_EQ(status_of(get_raw(port(), target)), 400) << target;
}

TEST_F(DashboardTest, DashboardDirServesOnlyItsOwnFiles) {
  const fs::path root = fs::temp_directory_path() / ("mddp-dash-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "web");
  std::ofstream(root / "web" / "index.html") << "<p>dev page</p>";
  std::ofstream(root / "secret.txt") << "secret";
  fs::create_symlink(root / "secret.txt", root / "web" / "leak.txt");
  fs::create_symlink("/etc", root / "web" / "etc");
  serve(root / "web");

  const auto page = request(port(), "/");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_EQ(page.body(), "<p>dev page</p>");
  EXPECT_EQ(request(port(), "/leak.txt").result_int(), 403);
  EXPECT_EQ(request(port(), "/etc/passwd").result_int(), 403);
  for (const char* target : {"/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt"}) {
    const std::string r = get_raw(port(), target);
    EXPECT_EQ(status_of(r), 400) << target;
    EXPECT_EQ(r.find("secret\n"), std::string::npos);
  }
  EXPECT_EQ(request(port(), "/missing.js").result_int(), 404);
  // The chart libraries come from the binary (they are not in the page's folder).
  const auto lib = request(port(), "/vendor/uPlot.iife.min.js");
  EXPECT_EQ(lib.result_int(), 200);
  EXPECT_NE(lib.body().find("uPlot"), std::string::npos);
  EXPECT_EQ(request(port(), "/vendor/missing.js").result_int(), 404);
  fs::remove_all(root);
}

TEST_F(DashboardTest, OversizedHeaderIsRefused) {
  const std::string r = raw_exchange(port(), "GET /api/job HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                                 std::string(10 << 10, 'a') + "\r\n\r\n");
  EXPECT_EQ(status_of(r), 431);
  // Just under the limit is fine.
  EXPECT_EQ(status_of(raw_exchange(
                port(), "GET /api/job HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(7 << 10, 'a') +
                            "\r\nConnection: close\r\n\r\n")),
            200);
}

TEST_F(DashboardTest, OnlyGetAndHead) {
  EXPECT_EQ(request(port(), "/api/job", http::verb::delete_).result_int(), 405);
  EXPECT_EQ(status_of(raw_exchange(port(),
                                   "POST /api/job HTTP/1.1\r\nHost: x\r\n"
                                   "Content-Length: 0\r\n\r\n")),
            405);
  EXPECT_EQ(status_of(raw_exchange(port(),
                                   "GET /api/job HTTP/1.1\r\nHost: x\r\n"
                                   "Content-Length: 5\r\n\r\nhello")),
            413);
  const auto head = request(port(), "/api/job", http::verb::head);
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_TRUE(head.body().empty());
  EXPECT_GT(std::stoul(std::string(head[http::field::content_length])), 0u);
}

// A hundred clients connected at once, all idle, then served last-come
// first, each answered before the next asks: a server that serves one
// connection at a time (or in the order they came) waits for the first
// one's request and answers none of the others. The deadline makes that a
// failure, not a hang; the idle timeout is raised above it, so a
// concurrent server keeps the waiting connections open meanwhile.
TEST_F(DashboardTest, HundredConcurrentClientsAreAllServed) {
  serve({}, 20s);
  feed(0, 20);
  constexpr int kClients = 100;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  net::io_context ioc;
  const tcp::endpoint server(net::ip::make_address("127.0.0.1"),
                             static_cast<unsigned short>(port()));
  std::vector<std::unique_ptr<beast::tcp_stream>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<beast::tcp_stream>(ioc));
    clients.back()->connect(server);
  }
  for (int i = kClients - 1; i >= 0; --i) {
    beast::tcp_stream& stream = *clients[static_cast<std::size_t>(i)];
    stream.expires_at(deadline);  // the stream closes itself then: the operations end
    http::request<http::empty_body> req{http::verb::get,
                                        i % 2 ? "/api/job" : "/api/metrics?since=0&max=10", 11};
    req.set(http::field::host, "127.0.0.1");  // HTTP/1.1: the connection stays open
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    beast::error_code error =
        run_async(ioc, [&](auto done) { http::async_write(stream, req, done); });
    if (!error)
      error = run_async(ioc, [&](auto done) { http::async_read(stream, buffer, res, done); });
    ASSERT_FALSE(error) << "client " << i << " of " << kClients
                        << " (asking in the reverse order of connecting) got no answer within 8 s: "
                        << error.message()
                        << "; a server that serves one connection at a time waits on client 0";
    EXPECT_EQ(res.result_int(), 200) << i;
    EXPECT_FALSE(json::parse(res.body()).empty()) << i;
  }
}

// One local process holding the documented cap of 256 idle
// connections must not take the page away. Its connections beyond the
// per-address bound (128) make room by closing its own oldest idle ones,
// every real client still gets its answer, from the same address or
// another, and when the server is full the address holding the most gives
// way.
TEST_F(DashboardTest, IdleConnectionsCannotLockClientsOut) {
  feed(0, 5);
  std::vector<int> hog;  // from 127.0.0.1, as the probe's
  for (int i = 0; i < 256; ++i) hog.push_back(connect_from(port(), "127.0.0.1"));
  const std::string get_job = "GET /api/job HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(status_of(raw_exchange(port(), get_job, 10s, "127.0.0.1")), 200)
      << "a client at the hog's own address";
  EXPECT_EQ(status_of(raw_exchange(port(), get_job, 10s, "127.0.0.2")), 200) << "another client";
  int closed = 0;
  for (int fd : hog) closed += closed_by_server(fd, 100ms) ? 1 : 0;
  EXPECT_GE(closed, 256 - 128 + 1)
      << "at most 128 connections from one address, and room for one more";

  // The server full: 128 from the hog, 128 idle from a second address.
  std::vector<int> second;
  for (int i = 0; i < 128; ++i) second.push_back(connect_from(port(), "127.0.0.3"));
  EXPECT_EQ(status_of(raw_exchange(port(), get_job, 10s, "127.0.0.4")), 200) << "a third client";
  EXPECT_EQ(status_of(raw_exchange(port(), get_job, 10s, "127.0.0.3")), 200);
  for (int fd : hog) ::close(fd);
  for (int fd : second) ::close(fd);
}

// Idle connections (nothing sent, or a header sent too slowly) are closed
// after ServerOptions::idle_timeout, here 300 ms, while a client that sends
// its request within it is answered: never held for the 30 s a busy one gets.
TEST_F(DashboardTest, SilentAndSlowClientsAreClosedAtTheIdleTimeout) {
  serve({}, 300ms);
  const int silent = connect_from(port(), "127.0.0.1");
  const int slow = connect_from(port(), "127.0.0.1");
  const std::string partial = "GET /api/job HTTP/1.1\r\nHost: x\r\n";  // no end of header
  ASSERT_EQ(::send(slow, partial.data(), partial.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(partial.size()));
  const int prompt = connect_from(port(), "127.0.0.1");
  std::this_thread::sleep_for(100ms);
  const std::string get_job = "GET /api/job HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(prompt, get_job.data(), get_job.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(get_job.size()));
  char buf[16] = {};
  ASSERT_GT(::recv(prompt, buf, sizeof buf - 1, 0), 0);
  EXPECT_EQ(status_of(buf), 200);
  // A trickle of header bytes does not keep the slow one open.
  for (int i = 0; i < 5; ++i) {
    (void)::send(slow, "X", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(closed_by_server(silent, 10s)) << "a connection that sent nothing";
  EXPECT_TRUE(closed_by_server(slow, 10s)) << "a connection whose header never ended";
  for (int fd : {silent, slow, prompt}) ::close(fd);
}

TEST_F(DashboardTest, MetricsPages) {
  feed(0, 10);  // 20 records
  json j = json::parse(request(port(), "/api/metrics?since=0&max=8").body());
  ASSERT_EQ(j["records"].size(), 8u);
  EXPECT_EQ(j["next"], 8);
  EXPECT_EQ(j["records"][0]["seq"], 1);
  EXPECT_EQ(j["records"][0]["rank"], 0);
  j = json::parse(request(port(), "/api/metrics?since=8&max=8").body());
  EXPECT_EQ(j["records"][0]["seq"], 9);
  EXPECT_EQ(j["next"], 16);
  j = json::parse(request(port(), "/api/metrics?since=16").body());
  EXPECT_EQ(j["records"].size(), 4u);
  EXPECT_EQ(j["next"], 20);
  j = json::parse(request(port(), "/api/metrics?since=20").body());
  EXPECT_TRUE(j["records"].empty());
  EXPECT_EQ(j["next"], 20);
  EXPECT_EQ(request(port(), "/api/metrics?max=0").result_int(), 400);
  EXPECT_EQ(request(port(), "/api/metrics?max=10001").result_int(), 400);
  EXPECT_EQ(request(port(), "/api/metrics?since=abc").result_int(), 400);
}

TEST_F(DashboardTest, Timeline) {
  feed(0, 5);
  json t = json::parse(request(port(), "/api/timeline").body());
  EXPECT_EQ(t["step"], 4);
  ASSERT_EQ(t["ranks"].size(), 2u);
  EXPECT_FALSE(t["ranks"][0]["phases"].empty());
  EXPECT_EQ(t["ranks"][1]["buckets"].size(), 2u);
  t = json::parse(request(port(), "/api/timeline?step=2").body());
  EXPECT_EQ(t["step"], 2);
  EXPECT_EQ(request(port(), "/api/timeline?step=99").result_int(), 404);
  const json s = json::parse(request(port(), "/api/stragglers?steps=5").body());
  EXPECT_TRUE(s.contains("ranks"));
}

// The timeline, the stragglers and the trace see only the steps that every
// rank reported, a duplicate delivery counting once.
TEST_F(DashboardTest, IncompleteStepsAreLeftOut) {
  feed(0, 5);
  feed(5, 2, 0);  // rank 1 has not reported steps 5 and 6 yet
  feed(3, 1, 0);  // rank 0's step 3 delivered twice
  EXPECT_EQ(json::parse(request(port(), "/api/timeline").body())["step"], 4);
  EXPECT_EQ(request(port(), "/api/timeline?step=5").result_int(), 404);
  EXPECT_EQ(json::parse(request(port(), "/api/timeline?step=3").body())["ranks"].size(), 2u);
  EXPECT_EQ(json::parse(request(port(), "/api/stragglers?steps=3").body())["steps"], 3);
  EXPECT_EQ(json::parse(request(port(), "/api/stragglers").body())["steps"], 5);
  EXPECT_EQ(json::parse(request(port(), "/api/stragglers").body())["min_late_ms"], 0.5);
  const auto trace = request(port(), "/api/trace?from=2&to=6");
  EXPECT_NE(trace[http::field::content_disposition].find("microddp-trace-2-4.json"),
            std::string::npos);
  EXPECT_EQ(request(port(), "/api/trace?from=5&to=6").result_int(), 404);
  feed(5, 1, 1);
  EXPECT_EQ(json::parse(request(port(), "/api/timeline").body())["step"], 5);
}

TEST_F(DashboardTest, TraceHasOneProcessPerRank) {
  feed(0, 30);
  const auto r = request(port(), "/api/trace");
  ASSERT_EQ(r.result_int(), 200);
  EXPECT_NE(r[http::field::content_disposition].find("microddp-trace-10-29.json"),
            std::string::npos);
  const json t = json::parse(r.body());
  std::set<int> named, with_spans;
  std::set<int64_t> steps;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") named.insert(e["pid"].get<int>());
    if (e["ph"] == "X") {
      with_spans.insert(e["pid"].get<int>());
      steps.insert(e["args"]["step"].get<int64_t>());
      EXPECT_GE(e["dur"].get<double>(), 0);
    }
  }
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  EXPECT_EQ(with_spans, named);
  EXPECT_EQ(steps.size(), 20u);
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  EXPECT_EQ(json::parse(request(port(), "/api/trace?from=3&to=5").body())["traceEvents"].size(),
            3u * 2 * (5 + 2) + 2 * 4);  // steps x ranks x (phases + buckets) + metadata
  EXPECT_EQ(request(port(), "/api/trace?from=0&to=500").result_int(), 400);
}

}  // namespace
}  // namespace mddp::dashboard::test
