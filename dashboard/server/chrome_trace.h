// /api/trace: step timelines as Chrome trace JSON (the Trace Event Format
// that chrome://tracing and https://ui.perfetto.dev open). One process per
// rank (pid = rank, named "rank R (host)") with two threads: "compute" (tid
// 0: the step's phases) and "comm" (tid 1: one event per bucket all-reduce).
// Times are µs on the aligned clock, from the first step's origin.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/perf/timeline.h"

namespace mddp::dashboard {

// `hosts[r]`: rank r's host ("" when unknown).
nlohmann::json chrome_trace(const std::vector<perf::StepTimeline>& steps,
                            const std::vector<std::string>& hosts);

}  // namespace mddp::dashboard
