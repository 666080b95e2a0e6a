// Tracker: what the dashboard says about the job beyond the raw records —
// progress, throughput, ETA, evaluations, per-rank phase means and byte
// counters — folded from every metrics record as the stream poller reads
// them (so nothing is lost when records fall out of the metrics log's
// bounded tail), plus the live state the Job holds (status, members,
// heartbeats) read at snapshot time.
//
// Not thread-safe: used on the server's io thread only.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/job.h"
#include "core/perf/cost_model.h"
#include "core/perf/goodput.h"
#include "core/train/config.h"

namespace mddp::dashboard {

// The phases of a step as the dashboard names them (API.md).
inline constexpr std::array<const char*, 6> kPhases = {"data",         "forward",    "backward",
                                                       "exposed_comm", "total_comm", "optimizer"};

struct EvalPoint {
  int64_t step = 0;
  double loss = 0, accuracy = -1;
  std::string sample;  // rank 0's generated text (a GPT on text), else ""
};

struct RankSnapshot {
  int rank = 0;
  std::string host, device, state, phase, message;
  int64_t pid = 0, step = 0;
  int threads = 0, cpus = 0;  // as the rank reported them; 0: not (yet) reported
  // Its host runs more compute threads than it has CPUs (core/perf/host_load.h).
  bool oversubscribed = false;
  double heartbeat_age_ms = 0;
  std::optional<double> clock_offset_ms;               // none until a record carried one
  std::array<double, kPhases.size()> phase_mean_ms{};  // over the last kPhaseWindow steps
  uint64_t allreduce_bytes = 0;                        // every record since the start
  // Its own loss at its latest step (none before its first record), and the
  // first step whose loss was NaN or infinite (0: none yet): a mean over
  // ranks hides which rank went first.
  std::optional<double> loss;
  int64_t nonfinite_since = 0;
};

struct JobSnapshot {
  std::string job_id;
  control::JobStatus status;
  int world_size = 0;      // of the attempt now (elastic: may be below the most)
  int max_world_size = 0;  // --world-size / --nproc
  std::string backend, transport, algorithm, ddp, compress, precision, model;
  double compression_ratio =
      0;  // fp32 gradient bytes / bytes sent as, every record so far (0: none)
  int64_t global_batch = 0, step = 0, total_steps = 0;
  std::optional<double> loss, eta_s;
  double samples_per_s = 0, elapsed_s = 0;
  std::vector<EvalPoint> evals;
  std::vector<RankSnapshot> ranks;  // empty while forming
  uint64_t records_total = 0;
  int attempt = 0;                             // the job's attempt now (0: never restarted)
  std::vector<coordinator::Restart> restarts;  // why each attempt after the first formed
  // Where each attempt after a restart resumed, once its first record came
  // (the loss chart's restart markers).
  std::vector<coordinator::MetricsLog::Resume> resumes;
  // The benchmark's alpha-beta fit for this job's link (transport `auto`:
  // shm when every rank is on one host, else tcp; algorithm `auto`: ring,
  // which carries the large buckets), from `microddp bench allreduce --fit`.
  std::optional<perf::LinkFit> fit;
  // The share of wall time spent on steps that count (core/perf/goodput.h).
  double goodput = 0;
  // The membership log's lines (coordinator/membership_log.h): who left and
  // joined at which step, and how long each change took to the next step.
  std::vector<nlohmann::json> membership;
};

class Tracker {
 public:
  static constexpr std::size_t kPhaseWindow = 50;          // steps per rank kept
  static constexpr int64_t kRateWindowNs = 2'000'000'000;  // samples/s over 2 s

  explicit Tracker(const coordinator::Job& job);

  // Folds in the next records (in seq order) and notes the job's state at `now`.
  void observe(const std::vector<control::MetricsRecord>& records, coordinator::TimePoint now);
  JobSnapshot snapshot(coordinator::TimePoint now) const;

 private:
  void observe_eval(const perf::StepMetrics& m);
  struct Sample {
    int64_t time_unix_ns = 0, step = 0;
    double loss = 0, step_ms = 0;
    std::array<double, kPhases.size()> phase_ms{};
  };
  struct RankWindow {
    std::deque<Sample> last;  // the latest kPhaseWindow training records
    int64_t clock_offset_ns = 0;
    uint64_t bytes = 0;
    uint64_t grad_bytes = 0;      // the fp32 gradients `bytes` stood for
    int64_t nonfinite_since = 0;  // the first step with a NaN or infinite loss (0: none)
  };

  double samples_per_s() const;
  // The snapshot's steps: what the job's config says (backend, DDP,
  // batch), each rank's state and phases, the benchmark fit of its link.
  void describe_config(JobSnapshot& s) const;
  void add_ranks(JobSnapshot& s, const std::vector<coordinator::Member>& members,
                 coordinator::TimePoint now) const;
  std::optional<perf::LinkFit> link_fit(const JobSnapshot& s,
                                        const std::vector<coordinator::Member>& members) const;
  std::string rank_state(const coordinator::RankHealth& h, const control::JobStatus& status,
                         coordinator::TimePoint now) const;

  const coordinator::Job& job_;
  const train::TrainConfig config_;
  const std::vector<perf::LinkFit> fits_;  // read once at start
  std::map<int, RankWindow> ranks_;
  std::vector<EvalPoint> evals_;  // one per evaluated step, in step order
  perf::Goodput goodput_;
  // Whether `auto` ran the direct all-reduce (a traced step showed it):
  // then the link's fit is the direct one's.
  bool ran_direct_ = false;
  int64_t step_ = 0;
  std::optional<coordinator::TimePoint> running_since_, ended_at_;
};

}  // namespace mddp::dashboard
