// What one training step cost on one rank: the record the metrics stream,
// the run log and the benchmarks share.
//
// Words: `exposed` communication is the time the training thread waited for
// all-reduces after backward; `total` communication is the sum of the
// all-reduce spans on the progress thread. The overlap fraction is the share
// of communication hidden behind backward: 1 - exposed / total.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/ddp/grad_sync.h"

namespace mddp::perf {

struct StepMetrics {
  int rank = 0;
  int64_t step = 0;
  double loss = 0;
  double data_ms = 0, forward_ms = 0, backward_ms = 0, exposed_comm_ms = 0, optimizer_ms = 0, step_ms = 0;
  double total_comm_ms = 0;
  std::size_t comm_bytes = 0;
  std::vector<ddp::CommSpan> buckets;  // per bucket (or parameter): ready, launch, start, end

  double overlap() const;  // in [0, 1]; 0 when nothing was communicated
  nlohmann::json to_json() const;
};

// Overlap fraction from exposed and total communication time.
double overlap_fraction(double exposed_ms, double total_ms);

}  // namespace mddp::perf
