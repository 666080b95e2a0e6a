// The GET routes of API.md, as plain functions from a request target to a
// reply: no sockets here (http_session.cc does the HTTP), so they are cheap
// to read and to test.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coordinator/job.h"
#include "dashboard/server/static_files.h"
#include "dashboard/server/tracker.h"

namespace mddp::dashboard {

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
};

struct RouteContext {
  const coordinator::Job& job;
  const Tracker& tracker;
  const StaticFiles& files;
};

// Limits of API.md.
inline constexpr int64_t kMetricsPageDefault = 2000, kMetricsPageMax = 10000;
inline constexpr int64_t kStragglerStepsDefault = 50, kStragglerStepsMax = 5000;
inline constexpr int64_t kTraceStepsDefault = 20, kTraceStepsMax = 200;
inline constexpr std::size_t kCollectiveStepsListed = 30;  // traced steps /api/collectives offers

// The answer to `GET target` (400 for a malformed target, 404 for an
// unknown path). /api/stream is not here: it is a WebSocket (ws_session.h).
Reply route(std::string_view target, const RouteContext& ctx);

}  // namespace mddp::dashboard
