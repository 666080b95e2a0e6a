// The worker's pieces against a real coordinator on 127.0.0.1 (ephemeral
// ports) or a deliberately flaky one: the store under the data plane, the
// heartbeat's verdicts, the metrics streamer's re-sends, the data address.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "coordinator/coordinator.h"
#include "core/comm/communicator.h"
#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/comm/transport/tcp/socket.h"
#include "core/common/timer.h"
#include "proto/microddp.grpc.pb.h"
#include "worker/coordinator_client.h"
#include "worker/cpus.h"
#include "worker/data_address.h"
#include "worker/heartbeat.h"
#include "worker/metrics_streamer.h"

namespace mddp::worker {
namespace {

using namespace std::chrono_literals;
using coordinator::Coordinator;
using coordinator::CoordinatorOptions;

CoordinatorOptions options(int world, std::chrono::milliseconds interval = 100ms,
                           std::chrono::milliseconds timeout = 1000ms) {
  CoordinatorOptions o;
  o.port = 0;
  o.job.job_id = "job";
  o.job.token = "tok";
  o.job.world_size = world;
  o.job.heartbeat_interval = interval;
  o.job.heartbeat_timeout = timeout;
  o.job.rendezvous_timeout = 20s;
  o.job.linger = 500ms;
  return o;
}

ClientOptions client_options(const std::string& address) {
  return {address, "job", "tok", 10s};
}

JoinOptions join_args() {
  return {"testhost", "127.0.0.1", "cpu", -1, 20s};
}

TEST(CoordinatorClient, IsTheStoreUnderTheDataPlane) {
  Coordinator c(options(2));
  auto rank = [&](std::promise<float>& out) {
    CoordinatorClient client(client_options(c.address()));
    const JoinInfo info = client.join(join_args());
    auto comm =
        comm::connect(client, info.rank, info.world_size, {"job", info.attempt, info.data_key},
                      comm::TransportKind::kTcp, comm::CommOptions{.timeout = 20s}, "127.0.0.1");
    float v = static_cast<float>(info.rank + 1);
    comm->all_reduce(&v, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
    client.leave(true, "", 5s);
    out.set_value(v);
  };
  std::promise<float> a, b;
  std::thread t0(rank, std::ref(a)), t1(rank, std::ref(b));
  t0.join();
  t1.join();
  EXPECT_EQ(a.get_future().get(), 3.0f);
  EXPECT_EQ(b.get_future().get(), 3.0f);
}

TEST(CoordinatorClient, GetTimesOutNamingTheKey) {
  Coordinator c(options(1));
  CoordinatorClient client(client_options(c.address()));
  client.join(join_args());
  client.set("here", "1");
  EXPECT_EQ(client.get("here", 1s), "1");
  try {
    client.get("missing/key", 200ms);
    FAIL() << "expected a timeout";
  } catch (const comm::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("missing/key"), std::string::npos) << e.what();
  }
}

TEST(CoordinatorClient, WrongTokenIsRefused) {
  Coordinator c(options(1));
  ClientOptions o = client_options(c.address());
  o.token = "nope";
  CoordinatorClient client(o);
  try {
    client.join(join_args());
    FAIL() << "joined with a wrong token";
  } catch (const CoordinatorError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
  }
}

TEST(CoordinatorClient, UnreachableCoordinatorIsNamed) {
  CoordinatorClient client(client_options("127.0.0.1:1"));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    client.wait_connected(300ms);
    FAIL() << "connected to nothing";
  } catch (const CoordinatorError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// A "coordinator" that fails each connection on purpose: the first gets an
// HTTP/1.1 answer (gRPC reports a reason the worker does not recognise), every
// later one is closed at once ("Socket closed": a TLS server refusing a
// plaintext client looks the same).
class FailingListener {
 public:
  FailingListener() {
    auto [fd, port] = comm::tcp::listen_ephemeral("127.0.0.1");
    fd_ = std::move(fd);
    port_ = port;
    thread_ = std::thread([this] { serve(); });
  }
  ~FailingListener() {
    stop_ = true;
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    for (int n = 0; !stop_;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      comm::tcp::Fd conn(::accept(fd_.get(), nullptr, nullptr));
      if (!conn.valid()) continue;
      if (n++ == 0) {
        const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        [[maybe_unused]] const auto sent = ::write(conn.get(), answer, sizeof answer - 1);
      }
    }
  }
  comm::tcp::Fd fd_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// gRPC keeps a failing channel in TRANSIENT_FAILURE until a connection is
// ready, so a wait for the state to change outlasted the whole connect
// timeout when the first failure was not one the worker names. Each new
// failure must be looked at: the second one here is named within the timeout
// (before, the channel's state changed after about 30 s).
TEST(CoordinatorClient, ALaterFailureIsNamedWhenTheFirstIsNot) {
  FailingListener listener;
  CoordinatorClient client(client_options(listener.address()));
  try {
    client.wait_connected(15s);
    FAIL() << "connected to a listener that closes every connection";
  } catch (const CoordinatorError& e) {
    EXPECT_NE(std::string(e.what()).find("closed the connection during set-up"), std::string::npos)
        << e.what();
  }
}

// A world-size-1 communicator to abort.
std::unique_ptr<comm::Communicator> solo_comm() {
  comm::MemoryStore store;
  return comm::connect(store, 0, 1, {"job", 0, ""}, comm::TransportKind::kTcp,
                       comm::CommOptions{.timeout = 5s});
}

TEST(Heartbeat, JobFailureAbortsTheCommunicator) {
  Coordinator c(options(1));
  CoordinatorClient client(client_options(c.address()));
  client.join(join_args());
  ProgressBoard board;
  board.set(7, "forward");
  Heartbeat hb(client, board, {100ms, 1000ms});
  auto comm = solo_comm();
  hb.attach(comm.get());
  hb.start();
  c.job().shutdown("rank 3 (host x) exploded");
  const auto f = hb.wait_stop_reason(5s);
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->message.find("the job failed: rank 3 (host x) exploded"), std::string::npos)
      << f->message;
  EXPECT_FALSE(f->coordinator_lost);
  EXPECT_TRUE(hb.stopping());
  float v = 1;
  EXPECT_THROW(comm->all_reduce(&v, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait(),
               comm::AbortedError);
  hb.attach(static_cast<comm::ProcessGroup*>(nullptr));
  // The data plane's set-up, attached after the verdict, is aborted at once with it.
  comm::AbortSignal setup;
  hb.attach(&setup);
  EXPECT_TRUE(setup.aborted());
  EXPECT_NE(setup.reason().find("rank 3 (host x) exploded"), std::string::npos) << setup.reason();
  hb.attach(static_cast<comm::AbortSignal*>(nullptr));
}

TEST(ClockOffset, TrustsTheShortestRoundTripOfTheWindow) {
  ClockOffset c;
  EXPECT_EQ(c.offset_ns(), 0);
  c.add({1000, 1200, 50'000});  // rtt 200: offset 50'000 - 1100
  EXPECT_EQ(c.offset_ns(), 48'900);
  c.add({2000, 2900, 60'000});  // rtt 900: a worse sample does not replace it
  EXPECT_EQ(c.offset_ns(), 48'900);
  c.add({3000, 3100, 52'000});  // rtt 100: better
  EXPECT_EQ(c.offset_ns(), 48'950);
  c.add({0, 0, 0});  // a coordinator that does not stamp: ignored
  EXPECT_EQ(c.offset_ns(), 48'950);
  // The window forgets: after kWindow newer samples the best one is gone.
  for (int i = 0; i < ClockOffset::kWindow; ++i) c.add({10'000, 10'500, 70'000});
  EXPECT_EQ(c.offset_ns(), 70'000 - 10'250);
}

TEST(Heartbeat, EstimatesTheOffsetToTheCoordinatorsClock) {
  Coordinator c(options(1));
  CoordinatorClient client(client_options(c.address()));
  client.join(join_args());
  ProgressBoard board;
  Heartbeat hb(client, board, {50ms, 1000ms});
  hb.start();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (hb.clock_offset_ns() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  // Same host: steady + offset must be the wall clock, to within the loopback
  // round trip (generously bounded: the machine may be loaded).
  const auto unix_now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t error_ns = now_ns() + hb.clock_offset_ns() - unix_now();
  EXPECT_LT(std::abs(error_ns), 50'000'000) << "offset off by " << error_ns << " ns";
  hb.stop();
}

// What the rank runs on travels in its heartbeats (over real gRPC) into
// the coordinator's member: the device it resolved, its threads, its CPUs.
// The first beat that carries them goes at once, not an interval later (a
// short job may be over by then).
TEST(Heartbeat, CarriesTheResourcesIntoTheCoordinatorsMembers) {
  Coordinator c(options(1, 3000ms, 10000ms));
  CoordinatorClient client(client_options(c.address()));
  client.join({"testhost", "127.0.0.1", "", -1, 20s});  // device "": the job's
  ProgressBoard board;
  Heartbeat hb(client, board, {3000ms, 10000ms});
  hb.start();
  std::this_thread::sleep_for(200ms);  // the first beat went without them
  EXPECT_EQ(c.job().members().at(0).cpus, 0);
  hb.set_resources({"cuda:3", 4, 12});
  const auto deadline = std::chrono::steady_clock::now() + 1500ms;  // half the interval
  while (c.job().members().at(0).cpus == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const coordinator::Member m = c.job().members().at(0);
  EXPECT_EQ(m.device, "cuda:3");
  EXPECT_EQ(m.threads, 4);
  EXPECT_EQ(m.cpus, 12);
  EXPECT_EQ(m.host, "testhost");
  hb.stop();
}

TEST(UsableCpus, ReadsTheCgroupQuotaAndTheAffinityMask) {
  EXPECT_EQ(cpus_of_cpu_max("200000 100000\n"), 2);
  EXPECT_EQ(cpus_of_cpu_max("150000 100000"), 2);  // 1.5 CPUs of time: two threads can run
  EXPECT_EQ(cpus_of_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cpus_of_cpu_max("max 100000\n"), 0);
  EXPECT_EQ(cpus_of_cpu_max(""), 0);
  EXPECT_EQ(cpus_of_cpu_max("lots"), 0);
  // The tightest limit on the way up from the process' cgroup counts.
  const auto root =
      std::filesystem::temp_directory_path() / ("mddp-cgroup-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "slice" / "job");
  EXPECT_EQ(cgroup_cpu_limit(root, root / "slice" / "job"), 0);  // no cpu.max anywhere
  std::ofstream(root / "slice" / "cpu.max") << "300000 100000\n";
  std::ofstream(root / "slice" / "job" / "cpu.max") << "max 100000\n";
  EXPECT_EQ(cgroup_cpu_limit(root, root / "slice" / "job"), 3);
  std::ofstream(root / "cpu.max") << "100000 100000\n";
  EXPECT_EQ(cgroup_cpu_limit(root, root / "slice" / "job"), 1);
  std::filesystem::remove_all(root);
  // This process: at least one, at most what the affinity mask allows.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_LE(usable_cpus(), CPU_COUNT(&set));
}

// A coordinator that only answers heartbeats: RUNNING, until it vanishes
// (no goodbye, unlike a real coordinator's shutdown, which fails the job).
class RunningHeartbeats final : public v1::Coordinator::Service {
 public:
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatReply* reply) override {
    reply->set_state(v1::JOB_STATE_RUNNING);
    return grpc::Status::OK;
  }
};

// A stand-in coordinator serving `service` on an ephemeral port of 127.0.0.1.
struct StandIn {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // "127.0.0.1:PORT"; empty if it could not listen
};
StandIn serve(grpc::Service& service) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  StandIn s{builder.BuildAndStart(), ""};
  if (port != 0) s.address = "127.0.0.1:" + std::to_string(port);
  return s;
}

TEST(Heartbeat, GivesUpOnALostCoordinatorAfterTheTimeout) {
  RunningHeartbeats service;
  StandIn fake = serve(service);
  ASSERT_FALSE(fake.address.empty());
  CoordinatorClient client(client_options(fake.address));
  ProgressBoard board;
  Heartbeat hb(client, board, {100ms, 800ms});
  hb.start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(hb.stopping());
  const auto t0 = std::chrono::steady_clock::now();
  fake.server->Shutdown(std::chrono::system_clock::now());  // the coordinator is gone
  fake.server.reset();
  const auto f = hb.wait_stop_reason(10s);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->coordinator_lost) << f->message;
  EXPECT_NE(f->message.find("lost the coordinator at 127.0.0.1:"), std::string::npos) << f->message;
  EXPECT_GE(waited, 600ms);  // not before the timeout (less the last interval)
  EXPECT_LT(waited, 5s);
}

TEST(Heartbeat, CoordinatorShutdownEndsTheWorker) {
  auto c = std::make_unique<Coordinator>(options(1));
  CoordinatorClient client(client_options(c->address()));
  client.join(join_args());
  ProgressBoard board;
  Heartbeat hb(client, board, {100ms, 800ms});
  hb.start();
  const auto t0 = std::chrono::steady_clock::now();
  c.reset();  // fails the job and stops serving: heard as FAILED or as silence
  const auto f = hb.wait_stop_reason(10s);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->message.find("coordinator shut down") != std::string::npos ||
              f->message.find("lost the coordinator") != std::string::npos)
      << f->message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// A coordinator whose metrics streams break: the first after one batch.
class FlakyMetrics final : public v1::Coordinator::Service {
 public:
  grpc::Status StreamMetrics(grpc::ServerContext*, grpc::ServerReader<v1::MetricsBatch>* reader,
                             v1::MetricsAck* ack) override {
    const int call = calls_++;
    v1::MetricsBatch batch;
    int64_t n = 0;
    while (reader->Read(&batch)) {
      {
        std::lock_guard lock(mu_);
        for (const auto& s : batch.steps()) {
          steps_.insert(s.step());
          ++received_;
        }
      }
      n += batch.steps_size();
      if (call == 0)
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "flaky: stream broken on purpose");
    }
    ack->set_count(n);
    return grpc::Status::OK;
  }
  std::set<int64_t> steps() {
    std::lock_guard lock(mu_);
    return steps_;
  }
  int calls() const { return calls_; }

 private:
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::set<int64_t> steps_;
  int64_t received_ = 0;
};

TEST(MetricsStreamer, ResendsWhatABrokenStreamDidNotAcknowledge) {
  FlakyMetrics service;
  StandIn fake = serve(service);
  ASSERT_FALSE(fake.address.empty());
  CoordinatorClient client(client_options(fake.address));
  MetricsStreamer streamer(
      client, {.flush_interval = 20ms, .rotate = 200ms, .capacity = 10'000, .call_deadline = 5s});
  streamer.start();
  for (int s = 1; s <= 1000; ++s) {
    perf::StepMetrics m;
    m.step = s;
    streamer.push(m);
    if (s % 100 == 0) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(streamer.flush(10s));
  streamer.stop();
  EXPECT_GE(service.calls(), 2);
  const auto steps = service.steps();
  EXPECT_EQ(steps.size(), 1000u);
  EXPECT_EQ(*steps.begin(), 1);
  EXPECT_EQ(*steps.rbegin(), 1000);
  EXPECT_EQ(streamer.acknowledged(), 1000);
  fake.server->Shutdown(std::chrono::system_clock::now() + 1s);
}

TEST(MetricsStreamer, NeverBlocksAndDropsTheOldestWhenFull) {
  CoordinatorClient client(client_options("127.0.0.1:1"));  // nobody there
  MetricsStreamer streamer(
      client, {.flush_interval = 20ms, .rotate = 200ms, .capacity = 10, .call_deadline = 30s});
  streamer.start();
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 1; s <= 100; ++s) {
    perf::StepMetrics m;
    m.step = s;
    streamer.push(m);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_FALSE(streamer.flush(200ms));
  const auto t1 = std::chrono::steady_clock::now();
  streamer.stop();  // cancels the stream stuck on an unreachable coordinator
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 3s);
  EXPECT_GE(streamer.dropped(), 80);
  EXPECT_EQ(streamer.acknowledged(), 0);
}

TEST(DataAddress, LoopbackCoordinatorMeansLoopback) {
  EXPECT_EQ(choose_data_address("127.0.0.1:29500", "", "").addr, "127.0.0.1");
  EXPECT_EQ(choose_data_address("localhost:29500", "", "").addr, "127.0.0.1");
  EXPECT_EQ(choose_data_address("127.0.0.1:29500", "10.1.2.3", "").addr, "10.1.2.3");
  EXPECT_EQ(choose_data_address("127.0.0.1:29500", "", "lo").addr, "127.0.0.1");
}

TEST(DataAddress, UnknownInterfaceListsTheRealOnes) {
  try {
    choose_data_address("127.0.0.1:29500", "", "nosuch0");
    FAIL() << "accepted an unknown interface";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lo 127.0.0.1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_data_address("127.0.0.1:29500", "1.2.3.4", "lo"), InputError);
}

}  // namespace
}  // namespace mddp::worker
