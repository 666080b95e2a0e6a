// coordinator_load: the coordinator under thousands of light workers (not a
// test).
//
// Starts an in-process Coordinator on 127.0.0.1:0 (world size --workers, run
// dir in a fresh temp dir) and simulates the workers as gRPC callback-API
// clients over a few shared channels (no thread per worker). Each worker:
// Join (any rank) -> Validate (tiny identical fingerprint) -> Barrier "start"
// -> --heartbeats Heartbeats, one after another -> one StreamMetrics stream
// of --steps records (2 bucket spans each, in batches of --batch) ->
// WritesDone/Finish -> Leave(ok). The job's heartbeat timeout is set long
// enough that a worker silent for the rest of the run is not failed.
//
// Reports: join+validate+barrier time of all workers (target < 5 s),
// heartbeats answered per second with every worker beating at once (no
// target: they must not queue behind one lock), records ingested per second
// from the first record sent until the coordinator's MetricsLog count
// reaches workers*steps (target >= 50,000/s), that nothing was lost (step
// lines of metrics.jsonl, event lines such as "attempt" counted apart, and
// distinct (rank, step) pairs both equal workers*steps), and the peak
// resident memory of the process (the coordinator and the simulated clients
// share it). Exit status 0 only when every check is OK. Coordinator logs
// below error level are shown only with --verbose.
//
//   coordinator_load [--workers 1000] [--steps 100] [--batch 10] [--heartbeats
//   3]
//                    [--channels 4] [--json FILE] [--keep] [--verbose]
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "control/proof.h"
#include "coordinator/coordinator.h"
#include "core/common/hmac.h"
#include "proto/microddp.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = mddp::v1;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Options {
  int workers = 1000;
  int steps = 100;
  int batch = 10;
  int heartbeats = 3;
  int channels = 4;
  std::string json;
  bool keep = false;
  bool verbose = false;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--workers N] [--steps N] [--batch N] [--heartbeats "
               "N] [--channels N] "
               "[--json FILE] [--keep] [--verbose]\n",
               argv0);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    auto positive = [&]() {
      const int v = std::atoi(value().c_str());
      if (v <= 0) usage(argv[0]);
      return v;
    };
    if (a == "--workers") {
      o.workers = positive();
    } else if (a == "--steps") {
      o.steps = positive();
    } else if (a == "--batch") {
      o.batch = positive();
    } else if (a == "--heartbeats") {
      o.heartbeats = positive();
    } else if (a == "--channels") {
      o.channels = positive();
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--keep") {
      o.keep = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else {
      usage(argv[0]);
    }
  }
  return o;
}

// Counts failures and remembers the first message.
struct Errors {
  std::mutex mu;
  int count = 0;
  std::string first;
  void add(const std::string& what, const grpc::Status& s) {
    std::lock_guard lock(mu);
    if (count++ == 0) first = what + ": " + s.error_message();
  }
};

// One light worker: its setup calls (chained callbacks), then its stream.
struct Worker;

class Stream final : public grpc::ClientWriteReactor<v1::MetricsBatch> {
 public:
  explicit Stream(Worker& w) : w_(w) {}
  void start();
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;

 private:
  void write_next();
  Worker& w_;
  grpc::ClientContext ctx_;
  v1::MetricsBatch batch_;
  v1::MetricsAck ack_;
  int sent_ = 0;
};

struct Shared {
  explicit Shared(const Options& o) : opt(o) {}
  const Options& opt;
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs;
  Errors errors;
  std::latch* setup_done = nullptr;
  std::latch* beats_done = nullptr;
  std::latch* streams_done = nullptr;
  std::latch* left = nullptr;
  std::atomic<int64_t> first_send_ns{0};  // steady clock, 0 = none yet
  std::atomic<int64_t> acked{0};
};

struct Worker {
  Worker(Shared& s, v1::Coordinator::Stub* st) : sh(s), stub(st) {}
  Shared& sh;
  v1::Coordinator::Stub* stub;
  std::string session;
  int rank = -1;
  // Kept alive while their call is in flight.
  grpc::ClientContext hello_ctx, join_ctx, validate_ctx, barrier_ctx, leave_ctx;
  v1::HelloRequest hello_req;
  v1::HelloReply hello_reply;
  v1::JoinRequest join_req;
  v1::JoinReply join_reply;
  v1::ValidateRequest validate_req;
  v1::ValidateReply validate_reply;
  v1::BarrierRequest barrier_req;
  v1::BarrierReply barrier_reply;
  v1::LeaveRequest leave_req;
  v1::LeaveReply leave_reply;
  std::vector<std::unique_ptr<grpc::ClientContext>>
      heartbeat_ctx;  // one per call, alive to the end
  v1::HeartbeatRequest heartbeat_req;
  v1::HeartbeatReply heartbeat_reply;
  std::unique_ptr<Stream> stream;

  void deadline(grpc::ClientContext& ctx, std::chrono::seconds s) {
    ctx.set_deadline(std::chrono::system_clock::now() + s);
  }

  // Hello, then Join with the proof of the job's (empty) token.
  void join() {
    hello_req.set_job_id("load");
    hello_req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    deadline(hello_ctx, std::chrono::seconds(120));
    stub->async()->Hello(&hello_ctx, &hello_req, &hello_reply, [this](grpc::Status s) {
      if (!s.ok()) return fail("hello", s);
      join_proven();
    });
  }

  void join_proven() {
    join_req.set_job_id("load");
    join_req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    join_req.set_host("localhost");
    join_req.set_data_addr("127.0.0.1");
    join_req.set_device("cpu");
    join_req.set_pid(::getpid());
    join_req.set_version("bench");
    join_req.set_server_nonce(hello_reply.server_nonce());
    join_req.set_client_nonce(mddp::random_bytes(mddp::kNonceBytes));
    join_req.set_proof(mddp::control::join_proof("", "load", join_req.server_nonce(),
                                                 join_req.client_nonce(), join_req.host(),
                                                 join_req.pid()));
    deadline(join_ctx, std::chrono::seconds(120));
    stub->async()->Join(&join_ctx, &join_req, &join_reply, [this](grpc::Status s) {
      if (!s.ok()) return fail("join", s);
      session = join_reply.session();
      rank = join_reply.rank();
      validate();
    });
  }

  void validate() {
    validate_req.set_session(session);
    auto* fp = validate_req.mutable_fingerprint();
    fp->set_model("Sequential(Linear(4, 4))");
    auto* p = fp->add_parameters();
    p->set_name("0.weight");
    p->add_shape(4);
    p->add_shape(4);
    p = fp->add_parameters();
    p->set_name("0.bias");
    p->add_shape(4);
    fp->add_buckets()->add_parameters(1);
    fp->mutable_buckets(0)->add_parameters(0);
    fp->set_dtype("fp32");
    fp->set_version("bench");
    validate_req.set_timeout_ms(60000);
    deadline(validate_ctx, std::chrono::seconds(120));
    stub->async()->Validate(&validate_ctx, &validate_req, &validate_reply, [this](grpc::Status s) {
      if (!s.ok()) return fail("validate", s);
      barrier();
    });
  }

  void barrier() {
    barrier_req.set_session(session);
    barrier_req.set_name("start");
    barrier_req.set_timeout_ms(60000);
    deadline(barrier_ctx, std::chrono::seconds(120));
    stub->async()->Barrier(&barrier_ctx, &barrier_req, &barrier_reply, [this](grpc::Status s) {
      if (!s.ok()) return fail("barrier", s);
      sh.setup_done->count_down();
    });
  }

  // --heartbeats of them, each sent when the one before was answered.
  void heartbeat() {
    heartbeat_ctx.push_back(std::make_unique<grpc::ClientContext>());
    deadline(*heartbeat_ctx.back(), std::chrono::seconds(120));
    heartbeat_req.set_session(session);
    heartbeat_req.mutable_progress()->set_phase("setup");
    heartbeat_req.set_client_send_unix_ns(unix_ns());
    stub->async()->Heartbeat(
        heartbeat_ctx.back().get(), &heartbeat_req, &heartbeat_reply, [this](grpc::Status s) {
          if (s.ok() && heartbeat_reply.state() != v1::JOB_STATE_RUNNING)
            s = grpc::Status(grpc::StatusCode::INTERNAL, "the job is not running");
          if (!s.ok()) sh.errors.add("heartbeat", s);
          if (s.ok() && static_cast<int>(heartbeat_ctx.size()) < sh.opt.heartbeats)
            return heartbeat();
          sh.beats_done->count_down();
        });
  }

  void fail(const char* what, const grpc::Status& s) {
    sh.errors.add(what, s);
    sh.setup_done->count_down();
  }

  void leave() {
    leave_req.set_session(session);
    leave_req.set_ok(true);
    deadline(leave_ctx, std::chrono::seconds(60));
    stub->async()->Leave(&leave_ctx, &leave_req, &leave_reply, [this](grpc::Status s) {
      if (!s.ok()) sh.errors.add("leave", s);
      sh.left->count_down();
    });
  }
};

void Stream::start() {
  ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  w_.stub->async()->StreamMetrics(&ctx_, &ack_, this);
  write_next();
  StartCall();
}

void Stream::write_next() {
  batch_.Clear();
  batch_.set_session(w_.session);
  const int n = std::min(w_.sh.opt.batch, w_.sh.opt.steps - sent_);
  for (int i = 0; i < n; ++i) {
    auto* m = batch_.add_steps();
    const int64_t step = sent_ + i;
    m->set_step(step);
    m->set_loss(1.0 / static_cast<double>(step + 1));
    m->set_data_ms(0.1);
    m->set_forward_ms(1.0);
    m->set_backward_ms(2.0);
    m->set_exposed_comm_ms(0.2);
    m->set_total_comm_ms(0.8);
    m->set_optimizer_ms(0.3);
    m->set_step_ms(3.6);
    m->set_comm_bytes(2048);
    for (int b = 0; b < 2; ++b) {
      auto* s = m->add_buckets();
      s->set_index(b);
      s->set_bytes(1024);
      s->set_ready_ns(1000 * step + b);
      s->set_launch_ns(1000 * step + b + 10);
      s->set_start_ns(1000 * step + b + 20);
      s->set_end_ns(1000 * step + b + 400);
    }
    m->set_time_unix_ns(unix_ns());
  }
  sent_ += n;
  if (w_.sh.first_send_ns.load(std::memory_order_relaxed) == 0) {
    int64_t expected = 0;
    const int64_t now = Clock::now().time_since_epoch().count();
    w_.sh.first_send_ns.compare_exchange_strong(expected, now);
  }
  StartWrite(&batch_);
}

void Stream::OnWriteDone(bool ok) {
  if (!ok) return;  // the stream broke; OnDone reports it
  if (sent_ < w_.sh.opt.steps) {
    write_next();
  } else {
    StartWritesDone();
  }
}

void Stream::OnDone(const grpc::Status& s) {
  if (!s.ok()) {
    w_.sh.errors.add("stream", s);
  } else {
    w_.sh.acked += ack_.count();
  }
  w_.sh.streams_done->count_down();
}

// Reads metrics.jsonl: step lines, event lines, distinct (rank, step) pairs,
// parse errors.
struct FileCheck {
  int64_t lines = 0;
  int64_t events = 0;
  int64_t distinct = 0;
  int64_t bad = 0;
};

FileCheck check_file(const fs::path& path) {
  FileCheck c;
  std::set<std::pair<int64_t, int64_t>> seen;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.value("kind", "") != "step") {
        ++c.events;
        continue;
      }
      ++c.lines;
      seen.emplace(j.at("rank").get<int64_t>(), j.at("step").get<int64_t>());
    } catch (const std::exception&) {
      ++c.bad;
    }
  }
  c.distinct = static_cast<int64_t>(seen.size());
  return c;
}

// The process's peak resident set (VmHWM of /proc/self/status), MiB; 0 unknown.
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return 0;
}

int error_count(Errors& errors) {
  std::lock_guard lock(errors.mu);
  return errors.count;
}

// Everything the report prints, gathered phase by phase.
struct Results {
  int64_t expected = 0;  // workers * steps records
  double setup_s = 0;
  int setup_errors = 0;  // calls failed by the end of the heartbeat phase
  double beats_per_s = 0;
  double ingest_s = 0;
  int64_t ingested = 0;
  FileCheck file;
  std::string job_state = "?";
  double rate = 0;
  double rss_mib = 0;
};

// The checks that decide the exit status.
struct Verdict {
  bool setup = false;
  bool rate = false;
  bool lossless = false;
  bool job = false;
  bool all() const { return setup && rate && lossless && job; }
};

std::unique_ptr<mddp::coordinator::Coordinator> start_coordinator(const Options& opt,
                                                                  const fs::path& run_dir) {
  mddp::coordinator::CoordinatorOptions copt;
  copt.host = "127.0.0.1";
  copt.port = 0;
  copt.job.job_id = "load";
  copt.job.world_size = opt.workers;
  copt.job.heartbeat_interval = std::chrono::seconds(1);
  copt.job.heartbeat_timeout = std::chrono::minutes(10);  // a few heartbeats, then silence
  copt.job.rendezvous_timeout = std::chrono::minutes(2);
  copt.job.run_dir = run_dir;
  return std::make_unique<mddp::coordinator::Coordinator>(copt);
}

// --channels stubs, each on its own connection, and the workers spread over
// them.
std::vector<std::unique_ptr<Worker>> connect_workers(Shared& sh, const std::string& addr) {
  const Options& opt = sh.opt;
  for (int i = 0; i < opt.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("mddp.bench.channel",
                i);  // distinct args: a connection per channel
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    sh.stubs.push_back(v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args)));
  }
  std::vector<std::unique_ptr<Worker>> workers;
  workers.reserve(static_cast<std::size_t>(opt.workers));
  for (int i = 0; i < opt.workers; ++i) {
    workers.push_back(
        std::make_unique<Worker>(sh, sh.stubs[static_cast<std::size_t>(i % opt.channels)].get()));
  }
  return workers;
}

// Phase 1: Join + Validate + Barrier "start", all workers.
void run_setup(Shared& sh, std::vector<std::unique_ptr<Worker>>& workers, Results& r) {
  std::latch setup_done(sh.opt.workers);
  sh.setup_done = &setup_done;
  const auto t0 = Clock::now();
  for (auto& w : workers) w->join();
  setup_done.wait();
  r.setup_s = seconds_since(t0, Clock::now());
  r.setup_errors = error_count(sh.errors);
}

// Phase 2: every worker's heartbeats, all workers beating at once.
void run_heartbeats(Shared& sh, std::vector<std::unique_ptr<Worker>>& workers, Results& r) {
  std::latch beats_done(sh.opt.workers);
  sh.beats_done = &beats_done;
  const auto t0 = Clock::now();
  for (auto& w : workers) w->heartbeat();
  beats_done.wait();
  const double beats_s = seconds_since(t0, Clock::now());
  r.setup_errors = error_count(sh.errors);
  if (beats_s > 0)
    r.beats_per_s = static_cast<double>(sh.opt.workers) * sh.opt.heartbeats / beats_s;
}

// Phase 3: one metrics stream per worker, timed from the first record sent
// until the coordinator's log holds them all (or a call fails, or 120 s).
void run_streams(Shared& sh, std::vector<std::unique_ptr<Worker>>& workers,
                 mddp::coordinator::Coordinator& coord, Results& r) {
  std::latch streams_done(sh.opt.workers);
  sh.streams_done = &streams_done;
  for (auto& w : workers) w->stream = std::make_unique<Stream>(*w);
  for (auto& w : workers) w->stream->start();
  const auto& log = coord.job().metrics_log();
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  while (log.count() < static_cast<uint64_t>(r.expected) && Clock::now() < give_up) {
    if (error_count(sh.errors) > 0) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto t1 = Clock::now();
  r.ingested = static_cast<int64_t>(log.count());
  const Clock::time_point t0{Clock::duration(sh.first_send_ns.load())};
  r.ingest_s = seconds_since(t0, t1);
  streams_done.wait();
}

// Phase 4: every worker leaves ok; the job should then succeed.
void run_leave(Shared& sh, std::vector<std::unique_ptr<Worker>>& workers,
               mddp::coordinator::Coordinator& coord, Results& r) {
  std::latch left(sh.opt.workers);
  sh.left = &left;
  for (auto& w : workers) w->leave();
  left.wait();
  if (!coord.wait_for(std::chrono::seconds(10))) {
    r.job_state = "not over";
    return;
  }
  const auto st = coord.job().status();
  r.job_state = st.state == mddp::control::State::kSucceeded ? "succeeded" : "failed";
  if (!st.failure().empty()) std::printf("job failure: %s\n", st.failure().c_str());
}

Verdict judge(const Results& r, Shared& sh) {
  const int64_t acked = sh.acked.load();
  return {.setup = r.setup_errors == 0 && r.setup_s < 5.0,
          .rate = r.ingested == r.expected && r.rate >= 50000,
          .lossless = r.file.lines == r.expected && r.file.distinct == r.expected &&
                      r.file.bad == 0 && acked == r.expected,
          .job = r.job_state == "succeeded" && sh.errors.count == 0};
}

void print_report(const Options& opt, const Results& r, const Verdict& v, Shared& sh) {
  const auto ll = [](int64_t x) { return static_cast<long long>(x); };
  const auto ok = [](bool b) { return b ? "OK" : "FAILED"; };
  const int64_t acked = sh.acked.load();
  std::printf(
      "coordinator_load: %d workers x %d steps (batch %d), %d "
      "heartbeats, %d channels, %u cores\n",
      opt.workers, opt.steps, opt.batch, opt.heartbeats, opt.channels,
      std::thread::hardware_concurrency());
  std::printf("%-34s %14s %12s %s\n", "measure", "value", "target", "");
  std::printf("%-34s %12.3f s %12s %s\n", "join+validate+barrier, all", r.setup_s, "< 5 s",
              ok(v.setup));
  std::printf("%-34s %10.0f h/s %12s\n", "heartbeats answered per second", r.beats_per_s, "");
  std::printf("%-34s %10.0f r/s %12s %s\n", "records ingested per second", r.rate, ">= 50000",
              ok(v.rate));
  std::printf("%-34s %12.3f s %12s\n", "  ingest time (first send -> all)", r.ingest_s, "");
  std::printf("%-34s %14lld %12lld %s\n", "metrics.jsonl lines", ll(r.file.lines), ll(r.expected),
              ok(r.file.lines == r.expected));
  std::printf("%-34s %14lld %12s\n", "  event lines (attempt, ...)", ll(r.file.events), "");
  std::printf("%-34s %14lld %12lld %s\n", "distinct (rank, step)", ll(r.file.distinct),
              ll(r.expected), ok(r.file.distinct == r.expected));
  std::printf("%-34s %14lld %12lld %s\n", "acked by the streams", ll(acked), ll(r.expected),
              ok(acked == r.expected));
  std::printf("%-34s %14s %12s %s\n", "job state after Leave", r.job_state.c_str(), "succeeded",
              ok(v.job));
  std::printf("%-34s %10.1f MiB %12s\n", "peak RSS, coordinator + clients", r.rss_mib, "");
  if (sh.errors.count > 0) {
    std::printf("%d call(s) failed; first: %s\n", sh.errors.count, sh.errors.first.c_str());
  }
  std::printf("%s\n", ok(v.all()));
}

void write_json(const Options& opt, const Results& r, const Verdict& v, Shared& sh) {
  const nlohmann::json j = {
      {"workers", opt.workers},
      {"steps", opt.steps},
      {"batch", opt.batch},
      {"heartbeats", opt.heartbeats},
      {"heartbeats_per_s", r.beats_per_s},
      {"channels", opt.channels},
      {"cores", std::thread::hardware_concurrency()},
      {"join_barrier_s", r.setup_s},
      {"ingest_s", r.ingest_s},
      {"records_per_s", r.rate},
      {"records_expected", r.expected},
      {"records_ingested", r.ingested},
      {"jsonl_lines", r.file.lines},
      {"jsonl_events", r.file.events},
      {"peak_rss_mib", r.rss_mib},
      {"distinct_rank_step", r.file.distinct},
      {"acked", sh.acked.load()},
      {"job_state", r.job_state},
      {"errors", sh.errors.count},
      {"ok",
       {{"join_barrier", v.setup}, {"rate", v.rate}, {"lossless", v.lossless}, {"job", v.job}}},
  };
  std::ofstream(opt.json) << j.dump(2) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  spdlog::set_level(opt.verbose ? spdlog::level::info : spdlog::level::err);

  char tmpl[] = "/tmp/mddp-coordinator-load-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path run_dir = tmpl;

  auto coord = start_coordinator(opt, run_dir);
  Shared sh(opt);
  auto workers = connect_workers(sh, coord->address());
  Results r;
  r.expected = static_cast<int64_t>(opt.workers) * opt.steps;
  run_setup(sh, workers, r);
  if (r.setup_errors == 0) run_heartbeats(sh, workers, r);
  if (r.setup_errors == 0) {
    run_streams(sh, workers, *coord, r);
    run_leave(sh, workers, *coord, r);
  }
  coord->shutdown("load benchmark done");
  coord.reset();  // flushes and closes metrics.jsonl
  workers.clear();
  if (r.setup_errors == 0) r.file = check_file(run_dir / "metrics.jsonl");

  r.rate = r.ingest_s > 0 ? static_cast<double>(r.ingested) / r.ingest_s : 0;
  r.rss_mib = peak_rss_mib();
  const Verdict v = judge(r, sh);
  print_report(opt, r, v, sh);
  if (!opt.json.empty()) write_json(opt, r, v, sh);
  if (opt.keep) {
    std::printf("run dir kept: %s\n", run_dir.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(run_dir, ec);
  }
  return v.all() ? 0 : 1;
}
