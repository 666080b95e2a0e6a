#include "core/perf/step_metrics.h"

#include <algorithm>

namespace mddp::perf {

double overlap_fraction(double exposed_ms, double total_ms) {
  if (total_ms <= 0) return 0;
  return std::clamp(1.0 - exposed_ms / total_ms, 0.0, 1.0);
}

double StepMetrics::overlap() const { return overlap_fraction(exposed_comm_ms, total_comm_ms); }

nlohmann::json StepMetrics::to_json() const {
  nlohmann::json spans = nlohmann::json::array();
  for (const auto& b : buckets)
    spans.push_back({{"index", b.index}, {"bytes", b.bytes}, {"ready_ns", b.ready_ns}, {"launch_ns", b.launch_ns},
                     {"start_ns", b.start_ns}, {"end_ns", b.end_ns}});
  return {{"rank", rank},           {"step", step},
          {"loss", loss},           {"data_ms", data_ms},
          {"forward_ms", forward_ms}, {"backward_ms", backward_ms},
          {"exposed_comm_ms", exposed_comm_ms}, {"total_comm_ms", total_comm_ms},
          {"optimizer_ms", optimizer_ms}, {"step_ms", step_ms},
          {"overlap", overlap()},   {"comm_bytes", comm_bytes},
          {"buckets", spans}};
}

}  // namespace mddp::perf
