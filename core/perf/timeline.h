// One step across all ranks on one clock: where each rank's phases and
// bucket all-reduces fall, and which rank arrived late and why.
//
// Each rank's record is in its own steady clock; adding its clock_offset_ns
// puts it on the coordinator's wall clock (Note in step_metrics.h). The
// all-reduce of the first bucket cannot finish before every rank has
// contributed, so a slow rank makes everyone wait there and the barrier hides
// who it was: the measured all-reduce of the fast ranks just looks long. The
// bucket-ready stamps do not hide it: the rank whose first bucket became
// ready last is the straggler, and comparing its phases with the median
// rank's says where it lost the time (a late start, data, forward, backward).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/perf/step_metrics.h"

namespace mddp::perf {

struct PhaseSpan {
  std::string name;  // data | forward | backward | exposed_comm | optimizer
  double start_ms = 0, end_ms = 0;
};

struct BucketSpanMs {
  int index = 0;
  std::size_t bytes = 0;
  double ready_ms = 0, launch_ms = 0, start_ms = 0, end_ms = 0;
  double busbw_gbps = 0;  // nccl-tests' busbw of the span's collective (op)
  comm::SpanOp op = comm::SpanOp::kAllReduce;
};

struct RankTimeline {
  int rank = 0;
  double start_ms = 0, end_ms = 0;
  std::vector<PhaseSpan> phases;
  std::vector<BucketSpanMs> buckets;
};

struct Straggler {
  int rank = -1;
  std::string phase;                        // start | data | forward | backward
  double late_ms = 0;                       // first bucket ready this much after the median rank's
  std::map<std::string, double> excess_ms;  // per phase: this rank minus the median rank
};

struct StepTimeline {
  int64_t step = 0;
  int64_t origin_unix_ns = 0;  // all *_ms are relative to this (earliest aligned start)
  std::vector<RankTimeline> ranks;
  std::optional<Straggler> straggler;  // none for one rank or without buckets
};

// Milliseconds from `origin_ns` to `ns` (both on the same clock).
double ns_to_ms_since(int64_t ns, int64_t origin_ns);

// Who arrived late at the first all-reduce of one step, and in which phase
// (the records of all ranks of that step). nullopt for one rank, or when a
// rank communicated nothing. `origin` is the common-clock zero of the *_ms.
std::optional<Straggler> find_straggler(const std::vector<StepMetrics>& step_records,
                                        int64_t origin);

// The timeline of one step from the records of all its ranks (training
// records of the same step, one per rank, any order).
StepTimeline build_timeline(const std::vector<StepMetrics>& step_records, int world_size);

// The steps whose records are complete (world_size training records), in
// step order, each with its records sorted by rank. Eval records are skipped;
// a duplicate (rank, step) keeps the first.
std::vector<std::vector<StepMetrics>> complete_steps(const std::vector<StepMetrics>& records,
                                                     int world_size);

struct StragglerRank {
  int rank = 0;
  int64_t late_steps = 0;
  double late_ms_total = 0;
  std::map<std::string, int64_t> by_phase;
};
struct StragglerSummary {
  int64_t steps = 0;
  double min_late_ms = 0;            // the threshold it counted with
  std::vector<StragglerRank> ranks;  // every rank that was late at least once, most late first
  std::optional<Straggler> worst;    // rank and phase with the most late time (late_ms = total)
};
// Counts who was late in each timeline. A step counts when its late rank was
// at least `min_late_ms` behind the median (noise below that is ignored).
StragglerSummary summarize_stragglers(const std::vector<StepTimeline>& steps,
                                      double min_late_ms = 0.5);

nlohmann::json to_json(const Straggler& s);
nlohmann::json to_json(const StepTimeline& t);
nlohmann::json to_json(const StragglerSummary& s);

}  // namespace mddp::perf
