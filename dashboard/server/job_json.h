// The JSON objects of API.md built from a JobSnapshot and the metrics log:
// the job header J, the rank table [K...], a record R, and the frames of
// /api/stream.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/metrics_log.h"
#include "dashboard/server/tracker.h"

namespace mddp::dashboard {

// Compact JSON text; invalid UTF-8 (a host name, a leave message) is replaced, never thrown on.
std::string dump_json(const nlohmann::json& j);

nlohmann::json job_json(const JobSnapshot& s);                // J
nlohmann::json ranks_json(const JobSnapshot& s);              // [K...]
nlohmann::json record_json(const control::MetricsRecord& r);  // R
// R less what the page does not draw (API.md, /api/stream).
nlohmann::json stream_record_json(const control::MetricsRecord& r);

// {"type": "job", "job": J, "ranks": [K...]}
std::string job_frame(const JobSnapshot& s);
// {"type": "metrics", "records": [...]} of records already serialised.
std::string metrics_frame(const std::vector<std::string>& records);

}  // namespace mddp::dashboard
