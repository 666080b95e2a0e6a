// The all-reduces of one step, step by step on every rank, on the
// coordinator's clock: what the dashboard's Collectives view animates. Built
// from the algorithm steps (comm::AlgoStep) a traced step's records carry
// (step_metrics.h), with the alpha-beta prediction of each beside it when a
// fit of the link is known (cost_model.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/perf/cost_model.h"
#include "core/perf/step_metrics.h"

namespace mddp::perf {

// One rank's side of one step: what it sent to whom and received from whom.
struct Transfer {
  int rank = 0;
  int to = -1, send_block = -1;    // -1: sent nothing / the whole buffer
  int from = -1, recv_block = -1;  // -1: received nothing / the whole buffer
  int64_t send_bytes = 0, recv_bytes = 0;
  double start_ms = 0, end_ms = 0;
};

// One step of the algorithm (a ring step, a tree round) across the ranks.
struct CollectiveStep {
  std::string phase;  // reduce-scatter | all-gather | reduce | broadcast
  int index = 0;
  std::vector<Transfer> transfers;  // in rank order
  double predicted_ms = 0;          // alpha + (largest message) / beta; 0 without a fit
};

// One bucket's all-reduce.
struct CollectiveView {
  int bucket = 0;
  std::size_t bytes = 0;
  std::string algorithm;              // as run: the job's --algo, `auto` resolved by size
  double start_ms = 0, end_ms = 0;    // first start and last end across ranks
  double predicted_ms = 0;            // the whole all-reduce by the model; 0 without a fit
  std::vector<CollectiveStep> steps;  // in the order the algorithm runs them
};

struct StepCollectives {
  int64_t step = 0;
  int world_size = 0;
  int64_t origin_unix_ns = 0;  // *_ms are after this (the earliest aligned step start)
  std::optional<LinkFit> fit;
  std::vector<CollectiveView> collectives;  // by bucket index; only buckets with steps
};

// From the records of one step (every rank's, any order). `algorithm` is the
// job's --algo (auto | ring | tree | naive | doubling).
StepCollectives build_collectives(const std::vector<StepMetrics>& step_records, int world_size,
                                  const std::string& algorithm, const std::optional<LinkFit>& fit);

// One direction of one link over some algorithm steps: the bytes the
// receiver took from the sender and how long it waited for them
// (Note [Link rate]).
struct LinkRate {
  int from = 0, to = 0;
  int64_t bytes = 0;
  double wait_ms = 0;
  int64_t transfers = 0;
  double gbps() const { return wait_ms > 0 ? static_cast<double>(bytes) / wait_ms * 1e-6 : 0; }
};
// Adds the transfers of every step of `c` to `links`, one entry per (from,
// to) in that order.
void add_link_rates(const StepCollectives& c, std::vector<LinkRate>& links);
// The links slowest first (by GB/s; a link with no measured wait last).
void sort_slowest_first(std::vector<LinkRate>& links);
nlohmann::json to_json(const std::vector<LinkRate>& links);

// {step, world_size, origin_unix_ns, fit, buckets: [summary...], collective, links}:
// every bucket's summary (its steps counted), and the steps of one bucket
// only — `bucket`, or the largest when -1 (the reply stays small at many
// ranks: a ring has 2(n-1) steps of n transfers). collective is null when
// the step carries no algorithm steps or `bucket` is not among them. links:
// every bucket's transfers, slowest link first.
nlohmann::json to_json(const StepCollectives& c, int bucket = -1);

}  // namespace mddp::perf
