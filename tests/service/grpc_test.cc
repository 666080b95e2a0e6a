// The coordinator over real gRPC on 127.0.0.1 (ephemeral port), with
// in-process clients, each on its own thread when it must wait.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "client.h"
#include "control/job_config_json.h"
#include "control/wire.h"
#include "coordinator/coordinator.h"
#include "nlohmann/json.hpp"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;
using test::TestClient;
namespace fs = std::filesystem;

CoordinatorOptions coordinator_options(int n) {
  CoordinatorOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.job.job_id = "job";
  o.job.token = "tok";
  o.job.world_size = n;
  train::TrainConfig cfg;
  cfg.batch = 32;
  o.job.config_json = dump_job_config(cfg);
  o.job.heartbeat_interval = 100ms;
  o.job.heartbeat_timeout = 2000ms;
  o.job.rendezvous_timeout = 20s;
  return o;
}

// Joins n clients concurrently; returns them in rank order.
std::vector<std::unique_ptr<TestClient>> join_all(const Coordinator& c, int n) {
  std::vector<std::unique_ptr<TestClient>> clients;
  std::vector<std::future<grpc::Status>> joins;
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<TestClient>(c.address()));
    joins.push_back(std::async(std::launch::async,
                               [&, i] { return clients[i]->join("host" + std::to_string(i)); }));
  }
  for (auto& j : joins) {
    const grpc::Status s = j.get();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  std::sort(clients.begin(), clients.end(),
            [](const auto& a, const auto& b) { return a->joined().rank() < b->joined().rank(); });
  return clients;
}

TEST(CoordinatorGrpc, JoinOfNGivesRanksSessionsAndTheConfig) {
  Coordinator c(coordinator_options(3));
  EXPECT_GT(c.port(), 0);
  auto clients = join_all(c, 3);
  std::set<std::string> sessions;
  for (int r = 0; r < 3; ++r) {
    const v1::JoinReply& j = clients[static_cast<std::size_t>(r)]->joined();
    EXPECT_EQ(j.rank(), r);
    EXPECT_EQ(j.world_size(), 3);
    EXPECT_EQ(j.heartbeat_interval_ms(), 100);
    EXPECT_EQ(j.heartbeat_timeout_ms(), 2000);
    EXPECT_EQ(parse_job_config(j.job_config_json()).batch, 32);
    sessions.insert(j.session());
  }
  EXPECT_EQ(sessions.size(), 3u);
  EXPECT_EQ(c.job().status().state, State::kRunning);
}

TEST(CoordinatorGrpc, WrongTokenIsRefusedWhileTheJobGoesOn) {
  Coordinator c(coordinator_options(2));
  TestClient a(c.address()), b(c.address()), intruder(c.address());
  auto pending = std::async(std::launch::async, [&] { return a.join("a"); });
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (c.job().joined() < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  const grpc::Status refused = intruder.join("x", "guessed");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(refused.error_message().find("wrong token"), std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(b.join("b").ok());
  EXPECT_TRUE(pending.get().ok());
  v1::HeartbeatReply hb;
  EXPECT_EQ(intruder.heartbeat(&hb).error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "no session, no service";
}

TEST(CoordinatorGrpc, DuplicateRankAndWorkerBeyondNAreRefused) {
  Coordinator c(coordinator_options(2));
  TestClient a(c.address()), dup(c.address()), b(c.address()), extra(c.address());
  auto pending = std::async(std::launch::async, [&] { return a.join("a", "tok", 1); });
  // The duplicate must come second.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (c.job().joined() < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  v1::JoinReply reply;
  grpc::Status s = dup.join(TestClient::join_request("dup", 1), &reply, 5s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("rank 1 is already taken by host a"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(b.join("b").ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_EQ(a.joined().rank(), 1);
  EXPECT_EQ(b.joined().rank(), 0);
  s = extra.join("c");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("is full: all 2 ranks joined"), std::string::npos)
      << s.error_message();
}

TEST(CoordinatorGrpc, ProtocolVersionMismatchIsRefused) {
  Coordinator c(coordinator_options(1));
  TestClient a(c.address());
  v1::JoinRequest req = TestClient::join_request("a");
  req.set_protocol_version(kProtocolVersion + 1);
  v1::JoinReply reply;
  const grpc::Status s = a.join(req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find(
                str("protocol v", kProtocolVersion + 1, ", this coordinator v", kProtocolVersion)),
            std::string::npos)
      << s.error_message();
  // A worker of protocol v1 sent no Hello: its join has no server nonce.
  v1::JoinRequest v1_join = TestClient::join_request("old");
  v1_join.set_protocol_version(1);
  const grpc::Status old = a.join_as_is(v1_join, &reply);
  EXPECT_EQ(old.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(old.error_message().find(str("protocol v1, this coordinator v", kProtocolVersion)),
            std::string::npos)
      << old.error_message();
}

// Note [Proving the token] (proto/README.md): the token never travels; a
// proof counts once, within its time; a wrong one is refused; the job goes on.
TEST(CoordinatorGrpc, ReplayedAndWrongProofsAreRefusedWhileTheJobGoesOn) {
  Coordinator c(coordinator_options(2));
  TestClient a(c.address()), b(c.address()), stranger(c.address());
  v1::JoinRequest req = TestClient::join_request("a");
  ASSERT_TRUE(a.prove(req, "tok").ok());
  EXPECT_EQ(req.server_nonce().size(), kNonceBytes);
  EXPECT_EQ(req.proof().size(), kMacBytes);
  v1::JoinReply reply_a;
  auto pending = std::async(std::launch::async, [&] { return a.join_as_is(req, &reply_a); });
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (c.job().joined() < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  v1::JoinReply reply;
  // The same request again (recorded on the wire): its server nonce is spent.
  grpc::Status s = stranger.join_as_is(req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("replay"), std::string::npos) << s.error_message();
  // A nonce never handed out.
  v1::JoinRequest made_up = req;
  made_up.set_server_nonce(random_bytes(kNonceBytes));
  s = stranger.join_as_is(made_up, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("replay"), std::string::npos) << s.error_message();
  // A fresh nonce, but the proof of another request (another host).
  v1::JoinRequest moved = TestClient::join_request("x");
  ASSERT_TRUE(stranger.prove(moved, "tok").ok());
  moved.set_host("y");
  s = stranger.join_as_is(moved, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("wrong token"), std::string::npos) << s.error_message();
  // No token at all: told how to give one.
  s = stranger.join(TestClient::join_request("z"), &reply, test::kCallDeadline, "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("no token given"), std::string::npos) << s.error_message();
  // Another job: refused at Hello.
  v1::HelloReply hello;
  s = stranger.hello("other", kProtocolVersion, &hello);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(b.join("b").ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_EQ(reply_a.attempt(), 0);
  EXPECT_EQ(reply_a.attempt_nonce().size(), kNonceBytes);
  EXPECT_EQ(b.joined().attempt_nonce(), reply_a.attempt_nonce()) << "one nonce per attempt";
}

v1::Fingerprint fingerprint(int64_t width) {
  v1::Fingerprint f;
  f.set_model("Sequential(Linear(784 -> " + std::to_string(width) + "))");
  auto* p = f.add_parameters();
  p->set_name("0.weight");
  p->add_shape(width);
  p->add_shape(784);
  f.set_dtype("fp32");
  f.set_version("0.1.0");
  return f;
}

TEST(CoordinatorGrpc, FingerprintDifferenceIsShownAndFailsTheJob) {
  Coordinator c(coordinator_options(2));
  auto w = join_all(c, 2);
  auto rank1 = std::async(std::launch::async, [&] { return w[1]->validate(fingerprint(128)); });
  std::this_thread::sleep_for(50ms);  // rank 1 waits for rank 0's fingerprint
  EXPECT_TRUE(w[0]->validate(fingerprint(256)).ok());
  const grpc::Status s = rank1.get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  const std::string host1 = w[1]->host();  // join order is up to the scheduler
  EXPECT_NE(s.error_message().find("rank 1 (host " + host1 + ") differs from rank 0: model"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find(
                "parameter 0 '0.weight': shape [128, 784] here vs [256, 784] on rank 0"),
            std::string::npos)
      << s.error_message();
  v1::HeartbeatReply hb;
  ASSERT_TRUE(w[0]->heartbeat(&hb).ok());
  EXPECT_EQ(hb.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(control::from_proto(hb.verdict()).failed_rank(), 1);
}

TEST(CoordinatorGrpc, BarrierReleasesAllAndTimesOutNamingTheMissing) {
  Coordinator c(coordinator_options(3));
  auto w = join_all(c, 3);
  for (int64_t gen = 0; gen < 2; ++gen) {
    std::vector<std::future<int64_t>> done;
    for (auto& cl : w)
      done.push_back(std::async(std::launch::async, [&cl] {
        int64_t g = -1;
        const grpc::Status s = cl->barrier("start", 10000, &g);
        EXPECT_TRUE(s.ok()) << s.error_message();
        return g;
      }));
    for (auto& d : done) EXPECT_EQ(d.get(), gen);
  }
  auto r0 = std::async(std::launch::async, [&] { return w[0]->barrier("end", 300); });
  const grpc::Status s2 = w[2]->barrier("end", 5000);
  const grpc::Status s0 = r0.get();
  EXPECT_EQ(s0.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s0.error_message().find("barrier 'end' (generation 0) timed out"), std::string::npos)
      << s0.error_message();
  EXPECT_NE(s0.error_message().find("rank 1 did not arrive (0, 2 did)"), std::string::npos)
      << s0.error_message();
  EXPECT_EQ(s2.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << "the generation fails together";
}

TEST(CoordinatorGrpc, KeyValueGetWaitsForSetAndTimesOut) {
  Coordinator c(coordinator_options(2));
  auto w = join_all(c, 2);
  std::string value;
  auto waiting =
      std::async(std::launch::async, [&] { return w[1]->get("comm/addr/0", 10000, &value); });
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(w[0]->set("comm/addr/0", "127.0.0.1:4242").ok());
  EXPECT_TRUE(waiting.get().ok());
  EXPECT_EQ(value, "127.0.0.1:4242");
  const auto t = std::chrono::steady_clock::now();
  const grpc::Status s = w[0]->get("comm/addr/1", 200, &value);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s.error_message().find("rank 0: key 'comm/addr/1' was not set within"),
            std::string::npos)
      << s.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t, 5s);
}

TEST(CoordinatorGrpc, ClientDeadlineEndsAPendingJoinAndFreesItsPlace) {
  Coordinator c(coordinator_options(2));
  TestClient quitter(c.address());
  v1::JoinReply reply;
  const grpc::Status s = quitter.join(TestClient::join_request("q", 0), &reply, 300ms);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  std::this_thread::sleep_for(100ms);  // the cancellation reaches the coordinator
  auto w = join_all(c, 2);             // rank 0 is free again, nobody is one too many
  EXPECT_EQ(w[0]->joined().rank(), 0);
}

TEST(CoordinatorGrpc, SilentRankFailsTheJobAndTheOthersHearItInTheirHeartbeat) {
  CoordinatorOptions o = coordinator_options(2);
  o.job.heartbeat_interval = 50ms;
  o.job.heartbeat_timeout = 400ms;
  o.job.linger = 300ms;  // rank 1 never leaves: the job is over this long after the failure
  Coordinator c(o);
  auto w = join_all(c, 2);
  v1::HeartbeatReply hb;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {  // rank 1 never beats
    ASSERT_TRUE(w[0]->heartbeat(&hb, 7).ok());
    if (hb.state() == v1::JOB_STATE_FAILED) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(hb.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(control::from_proto(hb.verdict()).failed_rank(), 1);
  const std::string host1 = w[1]->host();
  const std::string who1 = "rank 1 (host " + host1 + ", pid " + std::to_string(::getpid()) + ")";
  EXPECT_NE(hb.verdict().message().find(who1 + " stopped sending heartbeats"), std::string::npos)
      << hb.verdict().message();
  EXPECT_EQ(hb.verdict().cause(), v1::FAILURE_CAUSE_HEARTBEAT_TIMEOUT);
  EXPECT_EQ(hb.verdict().rank(), 1);
  EXPECT_EQ(hb.verdict().host(), host1);
  EXPECT_EQ(hb.client_send_unix_ns(), 12345);
  EXPECT_GT(hb.coordinator_receive_unix_ns(), 0);
  // Waits of the survivors end at once with the failure.
  std::string value;
  const grpc::Status g = w[0]->get("never", 10000, &value);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(g.error_message().find(who1), std::string::npos);
  ASSERT_TRUE(w[0]->leave(false, "aborted: rank 1 is gone").ok());
  EXPECT_TRUE(c.wait_for(10s));
  EXPECT_EQ(c.job().status().failed_rank(), 1);
}

// A worker's Watch stream that ends without a Leave (here cancelled, as the
// kernel closes a killed process's connection) while a peer reports its
// data-plane connection to it closed: the job fails at once naming it as
// dead, and every other watcher has the verdict pushed, no heartbeat needed.
TEST(CoordinatorGrpc, WatchPushesTheVerdictOfAStreamThatEndedWithoutLeave) {
  CoordinatorOptions o = coordinator_options(3);
  o.job.heartbeat_timeout = 60s;  // only the stream and the report can tell
  Coordinator c(o);
  auto w = join_all(c, 3);
  grpc::ClientContext ctx0, ctx2;
  ctx0.set_deadline(std::chrono::system_clock::now() + 30s);
  auto watch0 = w[0]->watch(ctx0);
  auto watch2 = w[2]->watch(ctx2);
  v1::JobEvent e0, e2;
  ASSERT_TRUE(watch0->Read(&e0));
  EXPECT_EQ(e0.state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(watch2->Read(&e2));
  ctx2.TryCancel();  // rank 2's process "dies"
  EXPECT_FALSE(watch2->Read(&e2));
  v1::PeerFaultReply reported;
  ASSERT_TRUE(w[1]->report_peer_fault(2, v1::PEER_FAULT_CLOSED,
                                      "rank 1: connection to rank 2: closed", &reported)
                  .ok());
  ASSERT_TRUE(watch0->Read(&e0)) << "the verdict is pushed";
  EXPECT_EQ(e0.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(e0.verdict().cause(), v1::FAILURE_CAUSE_PROCESS_DIED);
  EXPECT_EQ(e0.verdict().rank(), 2);
  EXPECT_EQ(e0.verdict().pid(), ::getpid());
  const std::string host2 = w[2]->host();
  EXPECT_EQ(e0.verdict().host(), host2);
  EXPECT_NE(e0.verdict().message().find("rank 2 (host " + host2 + ", pid " +
                                        std::to_string(::getpid()) + ") died"),
            std::string::npos)
      << e0.verdict().message();
  ASSERT_TRUE(w[0]->leave(false, "the job failed").ok());
  ASSERT_TRUE(w[1]->leave(false, "the job failed").ok());
  EXPECT_TRUE(c.wait_for(10s)) << "rank 2 is gone: the job does not wait for it";
  EXPECT_FALSE(watch0->Read(&e0)) << "the coordinator closes the stream once the job is over";
  EXPECT_TRUE(watch0->Finish().ok());
}

TEST(CoordinatorGrpc, MetricsStreamsArePersistedOneLinePerRankAndStep) {
  const fs::path dir =
      fs::temp_directory_path() / ("mddp_grpc_metrics_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CoordinatorOptions o = coordinator_options(3);
  o.job.run_dir = dir;
  constexpr int kSteps = 20;
  {
    Coordinator c(o);
    auto w = join_all(c, 3);
    std::vector<std::future<int64_t>> streams;
    for (auto& cl : w)
      streams.push_back(
          std::async(std::launch::async, [&cl] { return cl->stream_metrics(kSteps, 6); }));
    for (auto& s : streams) EXPECT_EQ(s.get(), kSteps);
    for (auto& cl : w) {
      v1::LeaveReply reply;
      ASSERT_TRUE(cl->leave(true, "", &reply).ok());
    }
    EXPECT_TRUE(c.wait_for(10s));
    EXPECT_EQ(c.wait().state, State::kSucceeded);
    EXPECT_EQ(c.job().metrics_log().count(), 3u * kSteps);
  }
  std::ifstream in(dir / "metrics.jsonl");
  std::set<std::pair<int, int64_t>> seen;
  int lines = 0, events = 0;
  for (std::string l; std::getline(in, l); ++lines) {
    const auto j = nlohmann::json::parse(l);
    if (j["kind"] == "attempt" || j["kind"] == "membership") {  // the attempt formed, trained
      EXPECT_EQ(j["attempt"], 0);
      ++events;
      continue;
    }
    EXPECT_EQ(j["attempt"], 0);
    seen.emplace(j["rank"].get<int>(), j["step"].get<int64_t>());
    EXPECT_EQ(j["buckets"][0]["bytes"], 4096);
  }
  EXPECT_EQ(events, 2);
  EXPECT_EQ(lines, 3 * kSteps + 2);
  EXPECT_EQ(seen.size(), 3u * kSteps) << "each (rank, step) exactly once";
  fs::remove_all(dir);
}

// A bucket's algorithm steps reach metrics.jsonl; a step whose phase the
// coordinator does not know ends that stream with INVALID_ARGUMENT, nothing else.
TEST(CoordinatorGrpc, AlgorithmStepsAreLoggedAndAnUnknownPhaseRefused) {
  const fs::path dir =
      fs::temp_directory_path() / ("mddp_grpc_steps_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CoordinatorOptions o = coordinator_options(1);
  o.job.run_dir = dir;
  Coordinator c(o);
  auto w = join_all(c, 1);
  const auto send = [&](const std::string& phase) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::MetricsAck ack;
    auto writer = w[0]->stub().StreamMetrics(&ctx, &ack);
    v1::MetricsBatch b;
    b.set_session(w[0]->joined().session());
    auto* m = b.add_steps();
    m->set_step(10);
    auto* span = m->add_buckets();
    span->set_bytes(8);
    span->set_start_ns(1000);
    auto* step = span->add_steps();
    step->set_phase(phase);
    step->set_send_peer(1);
    step->set_send_block(1);
    step->set_start_ns(1000);
    step->set_end_ns(1500);
    writer->Write(b);
    writer->WritesDone();
    return writer->Finish();
  };
  const grpc::Status bad = send("sideways");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("unknown step phase 'sideways'"), std::string::npos)
      << bad.error_message();
  ASSERT_TRUE(send("reduce-scatter").ok());
  EXPECT_EQ(c.job().metrics_log().count(), 1u);
  c.shutdown();
  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));  // the attempt's event line
  EXPECT_EQ(nlohmann::json::parse(line)["kind"], "attempt");
  ASSERT_TRUE(std::getline(in, line));  // its membership line, with its first step
  EXPECT_EQ(nlohmann::json::parse(line)["kind"], "membership");
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(nlohmann::json::parse(line)["buckets"][0]["steps"][0],
            nlohmann::json::parse(R"(["reduce-scatter",0,1,1,0,0,0,0,0,500])"));
  fs::remove_all(dir);
}

TEST(CoordinatorGrpc, ShutdownAnswersPendingCalls) {
  auto c = std::make_unique<Coordinator>(coordinator_options(2));
  auto w = join_all(*c, 2);
  std::string value;
  auto waiting = std::async(std::launch::async, [&] { return w[0]->get("never", 60000, &value); });
  std::this_thread::sleep_for(100ms);
  const auto t = std::chrono::steady_clock::now();
  c->shutdown("test over");
  const grpc::Status s = waiting.get();
  EXPECT_FALSE(s.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t, 5s);
  EXPECT_EQ(c->job().status().failure(), "test over");
}

TEST(CoordinatorGrpc, BusyPortIsAClearError) {
  Coordinator first(coordinator_options(1));
  CoordinatorOptions o = coordinator_options(1);
  o.port = first.port();
  try {
    Coordinator second(o);
    FAIL() << "two coordinators on one port";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mddp::coordinator
