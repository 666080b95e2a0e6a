// core/perf/analysis: synthetic metrics logs whose answer is known — a
// planted straggler is named, a communication-bound log is called so, the
// all-reduce prediction matches a log timed by the same fit — and bad input
// fails with the file and line.
#include "core/perf/analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/common/check.h"
#include "core/perf/collectives.h"
#include "support/files.h"

namespace mddp::perf {
namespace {

constexpr int64_t kMs = 1'000'000;                      // ns
constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // steady -> Unix ns, one host

// A job to simulate: every rank's phase times, the buckets that become ready
// evenly through backward, and how long each all-reduce takes once the last
// rank has joined it. One rank may be slower in one phase.
struct Plan {
  int world = 4;
  int steps = 40;
  double data = 0.5, forward = 4, backward = 6, optimizer = 0.5;  // ms
  int buckets = 2;
  std::size_t bucket_bytes = 1 << 20;
  double transfer_ms = 0.5;
  int slow_rank = -1;
  std::string slow_phase;
  double slow_ms = 0;
};

Plan sized(int world, int steps) {
  Plan p;
  p.world = world;
  p.steps = steps;
  return p;
}

// Simulates the progress thread: all-reduces run in bucket order, each
// starts on a rank when its bucket is ready there (and the previous one is
// done) and ends for everyone `transfer_ms` after the last rank started it.
std::vector<StepMetrics> make_log(const Plan& p) {
  std::vector<StepMetrics> out;
  for (int s = 0; s < p.steps; ++s) {
    std::vector<StepMetrics> step(p.world);
    std::vector<int64_t> bwd_start(p.world);
    for (int r = 0; r < p.world; ++r) {
      auto& m = step[r];
      const auto slow = [&](const char* phase) {
        return r == p.slow_rank && p.slow_phase == phase ? p.slow_ms : 0.0;
      };
      m.rank = r;
      m.step = s;
      m.data_ms = p.data + slow("data");
      m.forward_ms = p.forward + slow("forward") + 0.01 * ((s * 7 + r * 3) % 5);  // a little noise
      m.backward_ms = p.backward + slow("backward");
      m.optimizer_ms = p.optimizer;
      m.start_ns = static_cast<int64_t>(s) * 1000 * kMs;
      m.clock_offset_ns = kOffset;
      bwd_start[r] = m.start_ns + static_cast<int64_t>((m.data_ms + m.forward_ms) * kMs);
    }
    int64_t prev_end = 0;
    for (int k = 0; k < p.buckets; ++k) {
      int64_t last_start = 0;
      for (int r = 0; r < p.world; ++r) {
        comm::CommSpan b{k, p.bucket_bytes};
        b.ready_ns =
            bwd_start[r] + static_cast<int64_t>(step[r].backward_ms * kMs * (k + 1) / p.buckets);
        b.launch_ns = b.ready_ns;
        b.start_ns = std::max(b.ready_ns, prev_end);
        last_start = std::max(last_start, b.start_ns);
        step[r].buckets.push_back(b);
      }
      prev_end = last_start + static_cast<int64_t>(p.transfer_ms * kMs);
      for (auto& m : step) m.buckets.back().end_ns = prev_end;
    }
    for (int r = 0; r < p.world; ++r) {
      auto& m = step[r];
      const int64_t bwd_end = bwd_start[r] + static_cast<int64_t>(m.backward_ms * kMs);
      m.exposed_comm_ms =
          p.buckets ? std::max<double>(0, static_cast<double>(prev_end - bwd_end) / kMs) : 0;
      for (const auto& b : m.buckets)
        m.total_comm_ms += static_cast<double>(b.end_ns - b.start_ns) / kMs;
      m.comm_bytes = p.bucket_bytes * p.buckets;
      m.step_ms = m.data_ms + m.forward_ms + m.backward_ms + m.exposed_comm_ms + m.optimizer_ms;
      out.push_back(m);
    }
  }
  return out;
}

Analysis analyze_plan(const Plan& p, AnalyzeOptions o = {}) {
  RunLog run{"synthetic", make_log(p), {}, {}, {}};
  run.config.world_size = p.world;
  run.config.transport = "shm";
  run.config.algorithm = "ring";
  run.config.ddp = "bucketed";
  run.config.source = "test";
  return analyze(run, o);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(Analysis, SummarizeUsesNearestRankP95) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);
  const Stats s = summarize(v);
  EXPECT_EQ(s.n, 20);
  EXPECT_DOUBLE_EQ(s.mean, 10.5);
  EXPECT_DOUBLE_EQ(s.median, 10.5);
  EXPECT_DOUBLE_EQ(s.p95, 19);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 20);
  EXPECT_EQ(summarize({}).n, 0);
  EXPECT_DOUBLE_EQ(summarize({3}).p95, 3);
}

TEST(Analysis, PhasesSharesAndWarmup) {
  Plan p;
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.steps_in_log, p.steps);
  EXPECT_EQ(a.warmup_skipped, 5);
  EXPECT_EQ(a.steps_used, p.steps - 5);
  ASSERT_EQ(a.phases.size(), kNumPhases);
  EXPECT_EQ(a.phases[kBackward].name, "backward");
  EXPECT_NEAR(a.phases[kBackward].all.mean, p.backward, 1e-9);
  EXPECT_NEAR(a.phases[kData].share, p.data / a.phases[kStep].all.mean, 1e-12);
  EXPECT_EQ(a.phases[kData].rank_mean.size(), 4u);
  EXPECT_DOUBLE_EQ(a.comm_bytes_per_step, 2.0 * (1 << 20));
  EXPECT_EQ(a.series.size(), static_cast<std::size_t>(a.steps_used));
  // A short run keeps at least three quarters of its steps.
  p.steps = 8;
  EXPECT_EQ(analyze_plan(p).warmup_skipped, 2);
}

TEST(Analysis, PlantedStragglerIsNamedWithItsPhase) {
  Plan p;
  p.slow_rank = 2;
  p.slow_phase = "forward";
  p.slow_ms = 3;
  const Analysis a = analyze_plan(p);
  ASSERT_TRUE(a.stragglers.worst.has_value());
  EXPECT_EQ(a.stragglers.worst->rank, 2);
  EXPECT_EQ(a.stragglers.worst->phase, "forward");
  ASSERT_FALSE(a.stragglers.ranks.empty());
  EXPECT_EQ(a.stragglers.ranks.front().rank, 2);
  EXPECT_EQ(a.stragglers.ranks.front().late_steps, a.steps_used);
  EXPECT_EQ(a.phases[kForward].slowest_rank, 2);
  EXPECT_NE(joined(a.verdict.evidence).find("rank 2 was late"), std::string::npos)
      << joined(a.verdict.evidence);
  EXPECT_NE(joined(a.verdict.advice).find("rank 2"), std::string::npos);
  // The fast ranks wait in the all-reduce; its time is still the transfer's.
  EXPECT_NEAR(a.buckets.front().measured_ms.median, p.transfer_ms, 1e-6);
}

TEST(Analysis, AStragglerThatExplainsTheExposedCommIsAdvisedFirst) {
  Plan p;
  p.slow_rank = 1;
  p.slow_phase = "data";
  p.slow_ms = 10;  // the other three wait ~10 ms in the first all-reduce
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "communication-bound");
  EXPECT_EQ(a.stragglers.worst->phase, "data");
  ASSERT_FALSE(a.verdict.advice.empty());
  EXPECT_NE(a.verdict.advice.front().find("look at rank 1"), std::string::npos)
      << joined(a.verdict.advice);
}

TEST(Analysis, NoStragglerInABalancedJob) {
  const Analysis a = analyze_plan(Plan{});
  EXPECT_TRUE(a.stragglers.ranks.empty());
  EXPECT_EQ(joined(a.verdict.evidence).find("was late"), std::string::npos);
}

TEST(Analysis, CommunicationBoundLog) {
  Plan p;
  p.transfer_ms = 6;  // each of the 2 buckets: ~12 ms of all-reduce after an 11 ms step
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "communication-bound") << joined(a.verdict.evidence);
  EXPECT_GT(a.exposed_comm_share, 0.3);
  EXPECT_LT(a.overlap, 0.5);
  EXPECT_NE(joined(a.verdict.advice).find("bigger per-rank batch"), std::string::npos);
  // 1 MiB buckets with no fit are bandwidth-bound: compression and a faster link.
  EXPECT_NE(joined(a.verdict.advice).find("--compress"), std::string::npos)
      << joined(a.verdict.advice);
}

// A compressed job's log: the ratio is the fp32 gradient bytes over the
// bytes sent as; top-k's all-gathers stay out of the all-reduce table, and
// PowerSGD's two rounds of one bucket are separate rows.
TEST(Analysis, CompressionRatioAndCollectivesOfACompressedLog) {
  std::vector<StepMetrics> log = make_log(sized(2, 10));
  for (auto& m : log) {
    m.grad_bytes = 25 * m.comm_bytes;
    m.sent_bytes = m.comm_bytes / 2;
    m.buckets[0].op = comm::SpanOp::kAllGather;
    m.buckets[1].round = 1;
    m.buckets[1].bytes = 1000;
  }
  RunLog run{"synthetic", log, {}, {}, {}};
  run.config.world_size = 2;
  run.config.transport = "tcp";
  run.config.algorithm = "ring";
  const Analysis a = analyze(run, {});
  EXPECT_DOUBLE_EQ(a.compression_ratio(), 25.0);
  EXPECT_DOUBLE_EQ(a.sent_bytes_per_step, a.comm_bytes_per_step / 2);
  ASSERT_EQ(a.buckets.size(), 1u) << "the all-gather is not an all-reduce";
  EXPECT_EQ(a.buckets[0].bytes, 1000u);
  EXPECT_DOUBLE_EQ(to_json(a)["communication"]["compression_ratio"].get<double>(), 25.0);
}

TEST(Analysis, CommunicationBoundBySmallBucketsAdvisesLargerOnes) {
  Plan p;
  p.buckets = 40;
  p.bucket_bytes = 4096;
  p.transfer_ms = 0.4;
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "communication-bound");
  EXPECT_NE(joined(a.verdict.advice).find("larger buckets"), std::string::npos)
      << joined(a.verdict.advice);
}

TEST(Analysis, InputBoundLog) {
  Plan p;
  p.data = 5;
  p.forward = 2;
  p.backward = 3;
  p.transfer_ms = 0.2;
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "input-bound") << joined(a.verdict.evidence);
  EXPECT_NE(joined(a.verdict.advice).find("prefetch"), std::string::npos);
}

TEST(Analysis, ComputeBoundLog) {
  Plan p;
  p.data = 0.2;
  p.forward = 6;
  p.backward = 10;
  p.buckets = 4;  // the last one is always exposed: 3 of 4 hidden
  p.transfer_ms = 0.3;
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "compute-bound") << joined(a.verdict.evidence);
  EXPECT_GT(a.overlap, 0.5);
  EXPECT_LT(a.exposed_comm_share, 0.3);
}

TEST(Analysis, MemoryBoundLog) {
  Plan p;
  p.optimizer = 6;
  const Analysis a = analyze_plan(p);
  EXPECT_EQ(a.verdict.kind, "memory-bound") << joined(a.verdict.evidence);
}

TEST(Analysis, TheFurthestOverItsThresholdWins) {
  Plan p;
  p.data = 8;          // ~20% of the step: just input-bound
  p.transfer_ms = 12;  // far over the communication threshold
  EXPECT_EQ(analyze_plan(p).verdict.kind, "communication-bound");
}

TEST(Analysis, PredictedMatchesALogTimedByTheSameFit) {
  const LinkFit fit{"shm", "ring", 2, {20e-6, 2e9}, 0.999};
  Plan p;
  p.world = 2;
  p.bucket_bytes = 4 << 20;
  p.transfer_ms = allreduce_seconds("ring", static_cast<double>(p.bucket_bytes), 2, fit.link) * 1e3;
  AnalyzeOptions o;
  o.fits = {fit, {"tcp", "ring", 2, {1e-3, 1e8}, 0.9}, {"shm", "ring", 4, {1e-3, 1e8}, 0.9}};
  const Analysis a = analyze_plan(p, o);
  ASSERT_EQ(a.buckets.size(), 1u);
  const BucketStats& b = a.buckets.front();
  ASSERT_TRUE(b.fit.has_value());
  EXPECT_EQ(b.fit->transport, "shm");
  EXPECT_EQ(b.fit->world_size, 2);
  EXPECT_NEAR(b.predicted_ms, p.transfer_ms, 1e-9);
  EXPECT_NEAR(b.measured_ms.median / b.predicted_ms, 1.0, 1e-5);  // the log rounds to ns
  EXPECT_NEAR(b.busbw_gbps,
              bus_bandwidth_gbps(static_cast<double>(p.bucket_bytes), p.transfer_ms * 1e-3, 2),
              1e-3);
  EXPECT_NEAR(b.predicted_busbw_gbps, b.busbw_gbps, 1e-3);
  EXPECT_DOUBLE_EQ(b.per_step, 2);
  EXPECT_NEAR(a.predicted_comm_ms_per_step, 2 * p.transfer_ms, 1e-9);
  EXPECT_GT(b.latency_share, 0);
  EXPECT_LT(b.latency_share, 0.1);  // 4 MiB at 2 GB/s: bandwidth, not latency
  const auto j = to_json(a);
  EXPECT_NEAR(j["allreduces"][0]["predicted_ms"].get<double>(), p.transfer_ms, 1e-9);
  EXPECT_EQ(j["allreduces"][0]["fit"]["transport"], "shm");
}

TEST(Analysis, NoFitNoPredictionAndANote) {
  const Analysis a = analyze_plan(Plan{});
  EXPECT_FALSE(a.buckets.front().fit.has_value());
  EXPECT_EQ(a.predicted_comm_ms_per_step, 0);
  EXPECT_NE(joined(a.notes).find("microddp bench allreduce --fit"), std::string::npos)
      << joined(a.notes);
  EXPECT_TRUE(to_json(a)["allreduces"][0]["predicted_ms"].is_null());
}

TEST(Analysis, AutoAlgorithmIsResolvedBySize) {
  EXPECT_EQ(resolve_algorithm("auto", 1 << 20, 2), "ring");
  EXPECT_EQ(resolve_algorithm("auto", 64, 8), "doubling");
  EXPECT_EQ(resolve_algorithm("naive", 64, 8), "naive");
  EXPECT_EQ(resolve_algorithm("", 64, 8), "");
}

TEST(Analysis, IncompleteStepsAreLeftOutWithANote) {
  Plan p;
  RunLog run{"synthetic", make_log(p), {}, {}, {}};
  run.config.world_size = p.world;
  run.records.pop_back();  // the last step lacks rank 3
  const Analysis a = analyze(run, {});
  EXPECT_EQ(a.steps_used, p.steps - 1 - 5);
  EXPECT_NE(joined(a.notes).find("lack some rank's record"), std::string::npos);
}

TEST(Analysis, ParseNamesTheMalformedLine) {
  const std::string good = make_log(sized(1, 1))[0].to_json().dump();
  std::istringstream bad_json(good + "\n\n{\"rank\": 0, \"step\"\n");
  try {
    parse_metrics(bad_json, "run/metrics.jsonl");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run/metrics.jsonl:3"), std::string::npos) << e.what();
  }
  std::istringstream bad_type(good + "\n{\"rank\": 0, \"step\": \"seven\"}\n");
  try {
    parse_metrics(bad_type, "m.jsonl");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("m.jsonl:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step"), std::string::npos) << e.what();
  }
  std::istringstream not_record("[1, 2]\n");
  EXPECT_THROW(parse_metrics(not_record, "m.jsonl"), InputError);
}

// A last line cut short (no newline: a crash or a full disk mid-write) is
// skipped with a warning; the records before it are read.
TEST(Analysis, ParseSkipsATornLastLine) {
  const std::string good = make_log(sized(1, 1))[0].to_json().dump();
  std::istringstream torn(good + "\n" + good + "\n" + good.substr(0, good.size() / 2));
  EXPECT_EQ(parse_metrics(torn, "m.jsonl").size(), 2u);
  std::istringstream torn_then_more(good + "\n" + good.substr(0, 20) + "\n" + good + "\n");
  EXPECT_THROW(parse_metrics(torn_then_more, "m.jsonl"), InputError);
}

TEST(Analysis, MissingOrEmptyRunDirIsAClearError) {
  const auto dir = mddp::test::fresh_dir("empty");
  try {
    load_run(dir);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no metrics.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_run(dir / "nope"), InputError);
  std::ofstream(dir / "metrics.jsonl") << "\n";
  const RunLog run = load_run(dir);
  try {
    analyze(run, {});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no complete training step"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Time to accuracy: each evaluation carries the training time until it, the
// slowest rank's step times summed over the steps up to it; a log missing one
// of those steps gives no time rather than a short one.
TEST(Analysis, EvaluationsCarryTheTrainingTimeUntilThem) {
  std::vector<StepMetrics> log = make_log(sized(2, 12));
  for (auto& m : log) {
    ++m.step;  // the trainer's steps count from 1
    if (m.rank == 1) m.step_ms += 0.5 * static_cast<double>(m.step % 3);  // rank 1 sometimes slower
  }
  double want6 = 0, want12 = 0;
  for (int64_t step = 1; step <= 12; ++step) {
    double slowest = 0;
    for (const auto& m : log)
      if (m.step == step) slowest = std::max(slowest, m.step_ms);
    want12 += slowest;
    if (step <= 6) want6 += slowest;
  }
  for (int64_t step : {6, 12}) {
    StepMetrics eval;
    eval.eval = true;
    eval.step = step;
    eval.eval_accuracy = 0.5;
    log.push_back(eval);
  }
  RunLog run{"synthetic", log, {}, {}, {}};
  run.config.world_size = 2;
  Analysis a = analyze(run, {});
  ASSERT_EQ(a.evals.size(), 2u);
  EXPECT_NEAR(a.evals[0].train_s, want6 / 1000, 1e-12);
  EXPECT_NEAR(a.evals[1].train_s, want12 / 1000, 1e-12);
  EXPECT_GT(a.evals[1].train_s, a.evals[0].train_s);
  EXPECT_EQ(to_json(a)["evals"][1]["train_s"].get<double>(), a.evals[1].train_s);

  std::erase_if(run.records, [](const StepMetrics& m) { return !m.eval && m.step == 3; });
  a = analyze(run, {});
  EXPECT_EQ(a.evals[0].train_s, 0);
  EXPECT_TRUE(to_json(a)["evals"][0]["train_s"].is_null());
}

TEST(Analysis, LoadRunReadsTheLogAndJobJson) {
  const auto dir = mddp::test::fresh_dir("load");
  {
    std::ofstream out(dir / "metrics.jsonl");
    for (const auto& m : make_log(sized(2, 12))) out << m.to_json().dump() << "\n";
    StepMetrics eval;
    eval.eval = true;
    eval.step = 12;
    eval.eval_accuracy = 0.8;
    out << eval.to_json().dump() << "\n";
  }
  RunLog run = load_run(dir);
  EXPECT_EQ(run.records.size(), 25u);
  EXPECT_EQ(run.config.world_size, 2);
  EXPECT_EQ(run.config.transport, "shm");  // same clock offsets: one host
  EXPECT_TRUE(run.config.transport_inferred);
  EXPECT_EQ(analyze(run, {}).evals.size(), 1u);

  // What the coordinator writes (coordinator/job.cc): transport auto, ranks on two hosts.
  std::ofstream(dir / "job.json") << R"({"world_size": 2, "job_id": "x", "config": {"batch": 128,
      "dist": {"ddp": "hooked", "transport": "auto", "algorithm": "tree", "compress": "fp16"}},
      "members": [{"rank": 0, "host": "a"}, {"rank": 1, "host": "b"}]})";
  run = load_run(dir);
  EXPECT_EQ(run.config.source, "job.json");
  EXPECT_EQ(run.config.transport, "tcp");
  EXPECT_TRUE(run.config.transport_inferred);
  EXPECT_EQ(run.config.algorithm, "tree");
  EXPECT_EQ(run.config.ddp, "hooked");
  EXPECT_EQ(run.config.global_batch, 128);
  const Analysis a = analyze(run, {});
  EXPECT_GT(a.samples_per_s, 0);
  EXPECT_EQ(a.tokens_per_s, 0);  // records without tokens: not a language model
  EXPECT_TRUE(to_json(a)["tokens_per_s"].is_null());
  EXPECT_EQ(to_json(a)["config"]["compress"], "fp16");
  std::ofstream(dir / "job.json")
      << R"({"world_size": 2, "config": {"dist": {"transport": "shm"}}})";
  run = load_run(dir);
  EXPECT_EQ(run.config.transport, "shm");
  EXPECT_FALSE(run.config.transport_inferred);
  std::ofstream(dir / "job.json") << "{oops";
  EXPECT_THROW(load_run(dir), InputError);
  std::filesystem::remove_all(dir);
}

TEST(HostLoad, SumsThreadsPerHostAndTakesTheLargestCpuCount) {
  const auto hosts =
      host_loads({{3, "b", 2, 8}, {0, "a", 1, 2}, {2, "a", 1, 2}, {1, "b", 0, 4}, {4, "a", 1, 2}});
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "a");  // the host of rank 0 first
  EXPECT_EQ(hosts[0].ranks, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(hosts[0].threads, 3);
  EXPECT_EQ(hosts[0].cpus, 2);
  EXPECT_TRUE(hosts[0].oversubscribed());
  EXPECT_EQ(
      hosts[0].describe(),
      "host a: 3 ranks (0, 2, 4) x 1 compute thread = 3 threads on 2 CPUs, 1.5x oversubscribed");
  // Rank 1 did not report its threads: it counts as one.
  EXPECT_EQ(hosts[1].threads, 3);
  EXPECT_EQ(hosts[1].cpus, 8);
  EXPECT_FALSE(hosts[1].oversubscribed());
  EXPECT_NE(hosts[1].describe().find("counts as 1"), std::string::npos) << hosts[1].describe();
  // No CPU count: never oversubscribed, however many ranks.
  const auto unknown = host_loads({{0, "a", 4, 0}, {1, "a", 4, 0}});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_FALSE(unknown[0].cpus_known());
  EXPECT_FALSE(unknown[0].oversubscribed());
  EXPECT_EQ(rank_list({0, 1, 2, 3, 5, 7, 8}), "0-3, 5, 7, 8");
}

// A run directory as the coordinator leaves it: metrics.jsonl of `p` and a
// job.json whose members are all on host "a", with `members_extra` added to
// each member object (the CPU fields, or none as an older microddp wrote).
std::filesystem::path write_run_dir(const std::string& name, const Plan& p,
                                    const std::string& members_extra) {
  const auto dir = mddp::test::fresh_dir(name);
  std::ofstream out(dir / "metrics.jsonl");
  for (const auto& m : make_log(p)) out << m.to_json().dump() << "\n";
  std::string members;
  for (int r = 0; r < p.world; ++r)
    members += str(r ? ", " : "", R"({"rank": )", r, R"(, "host": "a", "device": "cpu", "pid": )",
                   100 + r, members_extra, "}");
  std::ofstream(dir / "job.json") << str(
      R"({"world_size": )", p.world,
      R"(, "config": {"batch": 128, "dist": {"ddp": "bucketed", "transport": "auto",
                                         "algorithm": "ring", "compress": "none"}}, "members": [)",
      members, "]}");
  return dir;
}

// 4 ranks x 1 thread on one host, exposed comm ~50 % of the step: the shares
// alone say communication-bound.
Plan four_ranks_waiting() {
  Plan p;
  p.transfer_ms = 6;
  return p;
}

TEST(Analysis, FourRanksOnTwoCpusAreOversubscribed) {
  const auto dir =
      write_run_dir("oversubscribed", four_ranks_waiting(), R"(, "threads": 1, "cpus": 2)");
  const Analysis a = analyze(load_run(dir), {});
  ASSERT_EQ(a.hosts.size(), 1u);
  EXPECT_EQ(a.hosts[0].threads, 4);
  EXPECT_EQ(a.hosts[0].cpus, 2);
  EXPECT_TRUE(oversubscribed(a));
  EXPECT_EQ(a.verdict.kind, "oversubscribed") << joined(a.verdict.evidence);
  EXPECT_EQ(a.verdict.by_shares, "communication-bound");
  const std::string evidence = joined(a.verdict.evidence);
  EXPECT_NE(
      evidence.find(
          "host a: 4 ranks (0-3) x 1 compute thread = 4 threads on 2 CPUs, 2x oversubscribed"),
      std::string::npos)
      << evidence;
  EXPECT_NE(evidence.find("inflated by the CPU sharing"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("would say communication-bound"), std::string::npos) << evidence;
  // The advice is about the CPUs, not the network.
  const std::string advice = joined(a.verdict.advice);
  EXPECT_NE(advice.find("its 2 CPUs fit 2 ranks of 1 compute thread (--nproc 2 there)"),
            std::string::npos)
      << advice;
  EXPECT_EQ(advice.find("--compress"), std::string::npos) << advice;
  const auto j = to_json(a);
  EXPECT_EQ(j["oversubscribed"], true);
  EXPECT_EQ(j["verdict"]["kind"], "oversubscribed");
  EXPECT_EQ(j["verdict"]["by_shares"], "communication-bound");
  ASSERT_EQ(j["hosts"].size(), 1u);
  EXPECT_EQ(j["hosts"][0]["host"], "a");
  EXPECT_EQ(j["hosts"][0]["threads"], 4);
  EXPECT_EQ(j["hosts"][0]["cpus"], 2);
  EXPECT_EQ(j["hosts"][0]["oversubscribed"], true);
  std::filesystem::remove_all(dir);
}

TEST(Analysis, ManyThreadsPerRankAreAdvisedFewerThreads) {
  Plan p = four_ranks_waiting();
  p.world = 2;
  const auto dir = write_run_dir("threads", p, R"(, "threads": 4, "cpus": 4)");
  const Analysis a = analyze(load_run(dir), {});
  EXPECT_EQ(a.verdict.kind, "oversubscribed");
  EXPECT_NE(joined(a.verdict.advice).find("--threads 2 fits 2 ranks in its 4 CPUs"),
            std::string::npos)
      << joined(a.verdict.advice);
  std::filesystem::remove_all(dir);
}

TEST(Analysis, TheSameLogOnEightCpusIsNotOversubscribed) {
  const auto dir =
      write_run_dir("enough-cpus", four_ranks_waiting(), R"(, "threads": 1, "cpus": 8)");
  const Analysis a = analyze(load_run(dir), {});
  ASSERT_EQ(a.hosts.size(), 1u);
  EXPECT_FALSE(a.hosts[0].oversubscribed());
  EXPECT_FALSE(oversubscribed(a));
  EXPECT_EQ(a.verdict.kind, "communication-bound") << joined(a.verdict.evidence);
  EXPECT_EQ(a.verdict.by_shares, "communication-bound");
  EXPECT_EQ(joined(a.verdict.evidence).find("oversubscribed"), std::string::npos);
  const auto j = to_json(a);
  EXPECT_EQ(j["oversubscribed"], false);
  EXPECT_EQ(j["hosts"][0]["oversubscribed"], false);
  std::filesystem::remove_all(dir);
}

TEST(Analysis, ARunDirWithoutCpuCountsMakesNoOversubscriptionClaim) {
  // job.json as an older microddp wrote it: no threads, no cpus.
  const auto dir = write_run_dir("old-job-json", four_ranks_waiting(), "");
  const Analysis a = analyze(load_run(dir), {});
  EXPECT_FALSE(oversubscribed(a));
  EXPECT_EQ(a.verdict.kind, "communication-bound");
  EXPECT_NE(joined(a.notes).find("oversubscription"), std::string::npos) << joined(a.notes);
  const auto j = to_json(a);
  EXPECT_TRUE(j["oversubscribed"].is_null());
  EXPECT_TRUE(j["hosts"][0]["cpus"].is_null());
  // Nulls (what the coordinator writes before a rank reported) read the same.
  std::filesystem::remove_all(dir);
  const auto nulls =
      write_run_dir("null-cpus", four_ranks_waiting(), R"(, "threads": null, "cpus": null)");
  EXPECT_FALSE(oversubscribed(analyze(load_run(nulls), {})));
  std::filesystem::remove_all(nulls);
  // And no job.json at all: no hosts.
  const Analysis bare = analyze_plan(four_ranks_waiting());
  EXPECT_TRUE(bare.hosts.empty());
  EXPECT_TRUE(to_json(bare)["oversubscribed"].is_null());
  EXPECT_EQ(bare.verdict.kind, "communication-bound");
}

// make_log(p) with algorithm steps added to the first bucket of every
// traced step (every tenth, as kStepTraceEvery traces them).
std::vector<StepMetrics> with_traced_steps(
    const Plan& p, const std::function<void(StepMetrics&, comm::CommSpan&)>& add_steps) {
  std::vector<StepMetrics> log = make_log(p);
  for (auto& m : log)
    if (m.step % 10 == 0) add_steps(m, m.buckets.front());
  return log;
}

// The analysis of `records` from a job of algorithm auto, with `fits`
// (every step analysed: no warm-up skipped).
Analysis analyze_auto(const std::vector<StepMetrics>& records, int world,
                      const std::string& transport, std::vector<LinkFit> fits,
                      std::vector<RankPlacement> members = {}) {
  RunLog run{"synthetic", records, {}, {}, {}};
  run.members = std::move(members);
  run.config.world_size = world;
  run.config.transport = transport;
  run.config.algorithm = "auto";
  run.config.source = "test";
  AnalyzeOptions o;
  o.warmup_steps = 0;
  o.fits = std::move(fits);
  return analyze(run, o);
}

// A 2 host x 2 rank job whose traced steps carry the hierarchical
// all-reduce's steps: 1 ms within hosts (two steps of 0.5 ms), 4 ms across
// (two of 2 ms), each cross-host step sending 1000 bytes; the split is read
// back per step, `auto` is named hierarchical, and with the shm and tcp ring
// fits it is predicted level by level.
TEST(Analysis, TheHierarchicalAllReduceIsSplitIntoItsLevels) {
  Plan p = sized(4, 20);
  p.buckets = 1;
  const std::vector<StepMetrics> log = with_traced_steps(p, [](StepMetrics&, comm::CommSpan& b) {
    int64_t t = b.start_ns;
    const auto add = [&](comm::StepLevel level, comm::StepPhase phase, double ms, int64_t bytes) {
      b.steps.push_back({.phase = phase,
                         .send_peer = 0,
                         .recv_peer = 0,
                         .send_bytes = bytes,
                         .recv_bytes = bytes,
                         .start_ns = t,
                         .end_ns = t + static_cast<int64_t>(ms * kMs),
                         .level = level});
      t += static_cast<int64_t>(ms * kMs);
    };
    add(comm::StepLevel::kHost, comm::StepPhase::kReduceScatter, 0.5, 10);
    add(comm::StepLevel::kCrossHost, comm::StepPhase::kReduceScatter, 2, 1000);
    add(comm::StepLevel::kCrossHost, comm::StepPhase::kAllGather, 2, 1000);
    add(comm::StepLevel::kHost, comm::StepPhase::kAllGather, 0.5, 10);
  });
  const Analysis a = analyze_auto(
      log, 4, "tcp", {{"shm", "ring", 2, {1e-6, 1e9}, 1}, {"tcp", "ring", 2, {1e-5, 1e8}, 1}},
      {{0, "a"}, {1, "a"}, {2, "b"}, {3, "b"}});
  ASSERT_TRUE(a.levels.has_value());
  EXPECT_EQ(a.levels->traced_steps, 2);
  EXPECT_NEAR(a.levels->host_ms, 1.0, 1e-9);
  EXPECT_NEAR(a.levels->cross_host_ms, 4.0, 1e-9);
  EXPECT_NEAR(a.levels->cross_host_bytes, 4 * 2000.0, 1e-9);
  EXPECT_EQ(a.levels->hosts, 2);
  EXPECT_EQ(a.levels->ranks_per_host, 2);
  EXPECT_EQ(a.config.algorithm, "hierarchical");
  EXPECT_EQ(a.buckets.front().algorithm, "hierarchical");
  // 1 MiB: within a host 2(2-1)(1 us + S/(2 GB/s)), across 2(2-1)(10 us + S/(2 x 100 MB/s)).
  const double S = 1 << 20;
  EXPECT_NEAR(a.levels->predicted_host_ms, (2 * (1e-6 + S / 2e9)) * 1e3, 1e-9);
  EXPECT_NEAR(a.levels->predicted_cross_host_ms, (2 * (1e-5 + S / 2e8)) * 1e3, 1e-9);
  EXPECT_TRUE(to_json(a)["hierarchical"].is_object());

  // Without steps that carry a level there is no split.
  EXPECT_FALSE(analyze_plan(p).levels.has_value());
}

// A 2-rank job on one host whose traced steps have the direct all-reduce's
// shape (a reduce-scatter step that only reads from the peer, an all-gather
// step that only writes to it): `auto` is named direct and its buckets are
// predicted with the direct fit, 2 alpha + S / beta at two ranks, not with
// the ring's by size. Without such steps the same log is ring's.
TEST(Analysis, TheDirectAllReduceIsNamedAndPredictedAsItself) {
  Plan p = sized(2, 20);
  p.buckets = 1;
  const std::vector<StepMetrics> log = with_traced_steps(p, [&](StepMetrics& m, comm::CommSpan& b) {
    const int peer = 1 - m.rank;
    const auto half = static_cast<int64_t>(p.bucket_bytes / 2);
    b.steps.push_back({.phase = comm::StepPhase::kReduceScatter,
                       .recv_peer = peer,
                       .recv_block = m.rank,
                       .recv_bytes = half,
                       .start_ns = b.start_ns,
                       .end_ns = b.end_ns});
    b.steps.push_back({.phase = comm::StepPhase::kAllGather,
                       .send_peer = peer,
                       .send_block = m.rank,
                       .send_bytes = half,
                       .start_ns = b.start_ns,
                       .end_ns = b.end_ns});
  });
  const auto analyze_log = [&](const std::vector<StepMetrics>& records) {
    return analyze_auto(records, 2, "shm",
                        {{"shm", "ring", 2, {1e-5, 1e9}, 1}, {"shm", "direct", 2, {2e-6, 4e9}, 1}});
  };
  const Analysis a = analyze_log(log);
  EXPECT_EQ(a.config.algorithm, "direct");
  ASSERT_EQ(a.buckets.size(), 1u);
  EXPECT_EQ(a.buckets.front().algorithm, "direct");
  ASSERT_TRUE(a.buckets.front().fit.has_value());
  EXPECT_EQ(a.buckets.front().fit->algorithm, "direct");
  const double S = static_cast<double>(p.bucket_bytes);
  EXPECT_NEAR(a.buckets.front().predicted_ms, (2 * 2e-6 + S / 4e9) * 1e3, 1e-9);
  EXPECT_TRUE(std::any_of(a.notes.begin(), a.notes.end(), [](const std::string& n) {
    return n.find("auto ran direct") != std::string::npos;
  }));
  EXPECT_TRUE(a.links.empty()) << "ranks that read each other's memory have no link to rate";
  const StepCollectives c = build_collectives(
      {log[0], log[1]}, 2, "auto", std::nullopt);  // step 0 is traced; as the dashboard sees it
  ASSERT_EQ(c.collectives.size(), 1u);
  EXPECT_EQ(c.collectives.front().algorithm, "direct");

  const Analysis untraced = analyze_log(make_log(p));  // no steps: auto resolved by size
  EXPECT_EQ(untraced.config.algorithm, "auto");
  EXPECT_EQ(untraced.buckets.front().algorithm, "ring");
  ASSERT_TRUE(untraced.buckets.front().fit.has_value());
  EXPECT_EQ(untraced.buckets.front().fit->algorithm, "ring");
}

// An elastic job that shrank from 3 to 2 ranks (docs/recovery.md): the
// restart names both sizes, and only the steps of the last size are kept
// (attempt 0's steps up to the resume, by 3 ranks, are left out and counted;
// its steps past the resume are superseded).
TEST(Analysis, ParseKeepsTheLastWorldSizeOfAnElasticJob) {
  std::ostringstream text;
  const auto records = [&](int world, int first, int last, int attempt) {
    for (int s = first; s <= last; ++s)
      for (int r = 0; r < world; ++r) {
        StepMetrics m = make_log(sized(1, 1))[0];
        m.rank = r;
        m.step = s;
        nlohmann::json j = m.to_json();
        j["attempt"] = attempt;
        text << j.dump() << "\n";
      }
  };
  text << R"({"kind":"attempt","attempt":0,"world_size":3})"
       << "\n";
  records(3, 1, 6, 0);
  text
      << R"({"kind":"restart","attempt":1,"cause":"died","rank":1,"host":"h","message":"rank 1 died"})"
      << "\n"
      << R"({"kind":"attempt","attempt":1,"world_size":2})"
      << "\n"
      << R"({"kind":"resume","attempt":1,"from_step":4,"steps_lost":2})"
      << "\n";
  records(2, 5, 8, 1);
  std::istringstream in(text.str());
  MetricsEvents events;
  const auto kept = parse_metrics(in, "m.jsonl", &events);
  const std::vector<RestartEvent>& restarts = events.restarts;
  const int64_t other = events.other_size_records;
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].from_world_size, 3);
  EXPECT_EQ(restarts[0].world_size, 2);
  EXPECT_EQ(restarts[0].resumed_from_step, 4);
  EXPECT_EQ(other, 4 * 3);  // steps 1..4 of attempt 0 (5 and 6 superseded)
  ASSERT_EQ(kept.size(), 4u * 2);
  for (const auto& m : kept) {
    EXPECT_TRUE(m.rank < 2 && m.step >= 5) << m.rank << " " << m.step;
    EXPECT_EQ(m.buckets.size(), 2u);
  }
  // One size, one resume: every record stays whole (none is moved onto itself).
  std::ostringstream plain_text;
  text.swap(plain_text);
  text << R"({"kind":"attempt","attempt":0,"world_size":2})"
       << "\n";
  records(2, 1, 6, 0);
  text << R"({"kind":"resume","attempt":1,"from_step":6,"steps_lost":0})"
       << "\n";
  std::istringstream plain(text.str());
  MetricsEvents plain_events;
  const auto all = parse_metrics(plain, "m.jsonl", &plain_events);
  EXPECT_EQ(plain_events.other_size_records, 0);
  ASSERT_EQ(all.size(), 6u * 2);
  for (const auto& m : all) EXPECT_EQ(m.buckets.size(), 2u) << m.rank << " " << m.step;
}

}  // namespace
}  // namespace mddp::perf
