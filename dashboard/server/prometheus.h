// /metrics: the job in the Prometheus text exposition format 0.0.4, the
// families listed in API.md. Every family has # HELP and # TYPE; every
// sample the label job="<job id>" and, per rank, rank="<r>".
#pragma once

#include <string>

#include "dashboard/server/tracker.h"

namespace mddp::dashboard {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const JobSnapshot& s);

}  // namespace mddp::dashboard
