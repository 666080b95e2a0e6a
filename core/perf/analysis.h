// The analysis of a finished (or running) job from its metrics log: what
// `microddp analyze RUN_DIR` prints, writes as JSON and plots.
//
// Words (as in step_metrics.h): a step's phases are data, forward, backward,
// exposed comm (the training thread waiting for all-reduces after backward)
// and optimizer; total comm is the sum of the all-reduce spans on the
// progress thread, most of it hidden behind backward. Shares are of the mean
// step time. Only complete steps (every rank reported) after the warm-up
// count, so every statistic is over the same steps.
//
// The bottleneck verdict and its thresholds are in bottleneck.cc
// (Note [Bottleneck verdict]); the all-reduce timing rule in analysis.cc
// (Note [Measured all-reduce time]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/perf/collectives.h"
#include "core/perf/cost_model.h"
#include "core/perf/goodput.h"
#include "core/perf/host_load.h"
#include "core/perf/step_metrics.h"
#include "core/perf/timeline.h"

namespace mddp::perf {

// What the analysis knows of the job's configuration. Empty strings / 0 are
// "unknown": the metrics log alone has no config; job.json in the run
// directory, when present, or the analyze flags fill it in.
struct RunConfig {
  int world_size = 0;               // from job.json, else the ranks seen in the log
  std::string transport;            // tcp | shm | auto | ""
  bool transport_inferred = false;  // `auto`/unknown resolved from the clock offsets
  std::string algorithm;     // ring | tree | naive | doubling | hierarchical | direct | auto | ""
  std::string ddp;           // naive | hooked | bucketed | sharded | ""
  std::string compress;      // none | fp16 | bf16 | topk:R | powersgd:R | "" (what was sent)
  std::string precision;     // fp32 | bf16 | fp16 | "" (--precision: the GEMMs)
  int64_t global_batch = 0;  // samples per step over all ranks
  std::string source;        // where the above came from, for the report
};

// One restart of the job, from metrics.jsonl's "restart" and "resume" lines.
struct RestartEvent {
  int attempt = 0;  // the attempt it started
  std::string cause;
  int rank = -1;  // the rank at fault (-1: none)
  std::string host, message;
  int64_t resumed_from_step = -1;  // -1: the attempt wrote no step
  int64_t steps_lost = 0;
  // The ranks of the attempt before and of this one ("attempt" lines; 0:
  // not logged). They differ when an elastic job (--min-nproc) shrank.
  int from_world_size = 0, world_size = 0;
  bool shrink = false;  // --on-failure shrink: the survivors went on in their processes
  bool grow = false;    // --on-failure heal: and workers joined them, healed from live ranks
};

// One membership change: metrics.jsonl's "membership" line of an attempt
// (coordinator/membership_log.h).
struct MembershipChange {
  int attempt = 0;
  int64_t from_step = 0;
  std::string how;  // start | restart | shrink | grow
  int world_size = 0;
  std::vector<std::string> left, joined;  // "rank 1 (host vm, pid 4102)"
  double to_first_step_s = 0;             // from the end of the attempt before
};

// What metrics.jsonl says besides the records (parse_metrics).
struct MetricsEvents {
  std::vector<RestartEvent> restarts;
  std::vector<MembershipChange> membership;
  Goodput goodput;  // over every training record, of every world size
  // Records left out because their attempt ran on another number of ranks
  // than the last one (an elastic job that shrank): one world size is analysed.
  int64_t other_size_records = 0;
};

struct RunLog {
  std::filesystem::path dir;
  // Every record of metrics.jsonl, in file order, less those a restart
  // superseded (one record per rank and step).
  std::vector<StepMetrics> records;
  RunConfig config;
  // job.json's members: host, compute threads, CPUs (0: not recorded, as in
  // a run of an older microddp). Empty without job.json.
  std::vector<RankPlacement> members;
  MetricsEvents events;
};

// Parses metrics.jsonl text (one JSON object per line; blank lines are
// skipped). The coordinator's event lines (with a "kind") are not records:
// a "resume" drops the records it superseded; the restarts and membership
// changes go to `events` when given, with the goodput of every training
// record. Throws InputError naming `name`:LINE and what is wrong. When
// attempts formed with different world sizes (an elastic job), only the
// records of those of the last attempt's size are kept (`events` counts
// those left out).
std::vector<StepMetrics> parse_metrics(std::istream& in, const std::string& name,
                                       MetricsEvents* events = nullptr);

// Reads RUN_DIR/metrics.jsonl (required) and RUN_DIR/job.json (optional).
// Throws InputError when the directory or the log is missing, or a line is
// malformed.
RunLog load_run(const std::filesystem::path& dir);

// Summary statistics; p95 by the nearest-rank rule. All zero when empty.
struct Stats {
  int64_t n = 0;
  double mean = 0, median = 0, p95 = 0, min = 0, max = 0;
};
Stats summarize(std::vector<double> values);

// One phase over every (rank, step), and its spread across ranks.
struct PhaseStats {
  std::string name;  // data | forward | backward | exposed_comm | optimizer | step | total_comm
  Stats all;
  std::vector<double> rank_mean;  // index = rank
  int slowest_rank = 0;           // highest rank mean
  double share = 0;               // all.mean / mean step time
};

// The all-reduces of one size (a bucket, or a parameter in hooked mode).
struct BucketStats {
  std::size_t bytes = 0;       // on the wire
  double per_step = 0;         // how many of this size a step launches
  std::string algorithm;       // as run: `auto` resolved by size ("" unknown)
  Stats measured_ms;           // per (step, bucket): Note [Measured all-reduce time]
  double busbw_gbps = 0;       // of the median time
  std::optional<LinkFit> fit;  // the fit for (transport, algorithm, world), if any
  double predicted_ms = 0;     // 0 without a fit
  double predicted_busbw_gbps = 0;
  double latency_share = 0;  // of the prediction, the alpha (per-message) part
};

// Means across ranks of one complete step, for the plots over time.
struct StepPoint {
  int64_t step = 0;
  double data_ms = 0, forward_ms = 0, backward_ms = 0, exposed_comm_ms = 0, optimizer_ms = 0;
  double step_ms = 0, total_comm_ms = 0, overlap = 0;
};

struct EvalPoint {
  int64_t step = 0;
  double loss = 0, accuracy = -1;
  // Training time until this evaluation: the sum over steps 1..step of the
  // slowest rank's step time (evaluations and start-up not counted), the
  // time-to-accuracy measure. 0 when the log lacks some of those steps.
  double train_s = 0;
};

// The hierarchical all-reduce's two levels (comm::StepLevel), from the
// algorithm steps that traced steps carry (kStepTraceEvery): per step, the
// time a rank spent in host-level and in cross-host steps (mean over ranks)
// and the bytes all ranks sent across hosts; beside them the prediction of
// the shm and tcp ring fits where job.json gives an even layout.
struct LevelSplit {
  int64_t traced_steps = 0;
  double host_ms = 0, cross_host_ms = 0;  // per step
  double cross_host_bytes = 0;            // per step, all ranks
  int hosts = 0, ranks_per_host = 0;      // ranks_per_host 0: uneven or unknown layout
  double predicted_host_ms = 0, predicted_cross_host_ms = 0;  // per step; 0 without both fits
};

struct Bottleneck {
  // oversubscribed | communication-bound | input-bound | memory-bound | compute-bound
  std::string kind;
  // What the step's shares alone say (kind unless oversubscribed, which
  // overrides them: Note [Bottleneck verdict]).
  std::string by_shares;
  std::vector<std::string> evidence;
  std::vector<std::string> advice;
};

// Positions in Analysis::phases.
enum PhaseIndex : std::size_t {
  kData,
  kForward,
  kBackward,
  kExposedComm,
  kOptimizer,
  kStep,
  kTotalComm,
  kNumPhases
};

struct AnalyzeOptions {
  int64_t warmup_steps = 5;   // complete steps skipped at the start (at most a quarter of them)
  double min_late_ms = 0.5;   // a step's late rank counts as a straggler from this much
  std::vector<LinkFit> fits;  // alpha-beta fits to predict the all-reduces from
};

struct Analysis {
  std::filesystem::path dir;
  RunConfig config;
  int64_t records = 0;       // training records in the log
  int64_t steps_in_log = 0;  // distinct training steps
  int64_t steps_used = 0;    // complete steps after the warm-up
  int64_t warmup_skipped = 0;
  std::vector<PhaseStats> phases;  // kNumPhases, by PhaseIndex
  double exposed_comm_share = 0, total_comm_share = 0;
  double overlap = 0;              // 1 - sum(exposed) / sum(total) over the steps used
  double comm_bytes_per_step = 0;  // messages handed to collectives (per rank)
  // fp32 gradient bytes those messages stand for, and what a rank really
  // sent (Note [Wire bytes] in core/comm/span.h); 0 in an older log.
  double grad_bytes_per_step = 0, sent_bytes_per_step = 0;
  double compression_ratio() const {
    return comm_bytes_per_step > 0 ? grad_bytes_per_step / comm_bytes_per_step : 0;
  }
  double samples_per_s = 0;               // 0 when the global batch is unknown
  double tokens_per_s = 0;                // a language model's; 0 for the others
  std::vector<BucketStats> buckets;       // by size, largest first
  std::optional<LevelSplit> levels;       // when the hierarchical all-reduce ran
  std::vector<LinkRate> links;            // over the traced steps, slowest first
  std::vector<LinkFit> fits;              // the fits of this run's transport and world size
  double predicted_comm_ms_per_step = 0;  // 0 unless every size has a fit
  StragglerSummary stragglers;
  double min_late_ms = 0;       // the straggler threshold used
  std::vector<HostLoad> hosts;  // from job.json's members (host_load.h); empty without them
  std::vector<StepPoint> series;
  std::vector<EvalPoint> evals;
  Bottleneck verdict;
  std::vector<std::string> notes;  // caveats: unknown config, assumptions, dropped records
};

// Throws InputError when the log holds no complete training step.
Analysis analyze(const RunLog& run, const AnalyzeOptions& options);

// Some host ran more compute threads than it had CPUs (host_load.h); false
// when no host's CPU count is known.
bool oversubscribed(const Analysis& a);

// The bottleneck verdict from an analysis' numbers (bottleneck.cc).
Bottleneck classify(const Analysis& a);

// The all-reduce algorithm that ran for a message of `bytes`: `auto` is
// resolved as the communicator resolves it on one host or one rank per host
// (by size and world; analyze() sets `hierarchical` or `direct` where the
// steps show it ran); "" stays "".
std::string resolve_algorithm(const std::string& algorithm, std::size_t bytes, int world_size);

// The fit's all-reduce time (ms) and busbw (GB/s) for `bytes` in this run
// (its algorithm, transport and world size); nullopt without a fit.
struct Prediction {
  double ms = 0, busbw_gbps = 0;
  LinkFit fit;
};
std::optional<Prediction> predict(const Analysis& a, std::size_t bytes);

nlohmann::json to_json(const Analysis& a);

}  // namespace mddp::perf
