// One rank's per-step record as the coordinator receives it on the
// StreamMetrics stream (control/wire.h reads it from the wire) and appends
// to its metrics log (coordinator/metrics_log.h).
#pragma once

#include <cstdint>

#include "core/perf/step_metrics.h"

namespace mddp::control {

struct MetricsRecord {
  perf::StepMetrics metrics;  // metrics.rank is the sender's rank
  int attempt = 0;            // the sender's attempt
  int64_t time_unix_ns = 0;   // the worker's wall clock at the end of the step
  int64_t received_unix_ns = 0;
  uint64_t seq = 0;  // position in the log, from 1 (set by append)
};

}  // namespace mddp::control
