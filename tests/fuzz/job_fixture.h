// A coordinator Job of two ranks (in memory, no gRPC), joined or still
// forming, and the dashboard's reading of it through every route: what the
// http_request and control_plane targets build on.
#pragma once

#include <string>
#include <vector>

#include "control/proof.h"
#include "coordinator/job.h"
#include "dashboard/server/routes.h"
#include "dashboard/server/static_files.h"
#include "dashboard/server/tracker.h"

namespace mddp::fuzz {

struct JobFixture {
  static constexpr int kWorld = 2;
  static coordinator::JobOptions options() {
    coordinator::JobOptions o;
    o.job_id = "job";
    o.token = "a-token";
    o.world_size = kWorld;
    o.heartbeat_timeout = std::chrono::minutes(10);
    return o;
  }

  coordinator::TimePoint now = coordinator::Clock::now();
  coordinator::Job job{options(), now};
  std::vector<std::string> sessions;  // of the ranks that joined

  explicit JobFixture(bool joined = true) {
    for (int r = 0; joined && r < kWorld; ++r) {
      control::JoinRequest req;
      req.job_id = "job";
      req.protocol_version = control::kProtocolVersion;
      req.host = "host" + std::to_string(r);
      req.requested_rank = r;
      req.server_nonce = job.hello(req.job_id, req.protocol_version, "fuzz", now).server_nonce;
      req.client_nonce = std::string(32, static_cast<char>('a' + r));
      req.proof = control::join_proof("a-token", req.job_id, req.server_nonce, req.client_nonce,
                                      req.host, req.pid);
      job.join(req, now + std::chrono::seconds(10), now,
               [this](coordinator::JoinResult res) { sessions.push_back(res.self.session); });
    }
    MDDP_CHECK(!joined || sessions.size() == kWorld, "the fixture's ranks did not join");
  }
  ~JobFixture() { job.shutdown("the fuzz input is done"); }
};

// Every GET route of dashboard/API.md over `job`, after the records so far
// were observed, as the server's stream would.
inline void read_dashboard(const coordinator::Job& job, coordinator::TimePoint now) {
  static const dashboard::StaticFiles files{std::filesystem::path()};
  dashboard::Tracker tracker(job);
  tracker.observe(job.metrics_log().since(0, 100000), now);
  const dashboard::RouteContext ctx{job, tracker, files};
  for (const char* target : {"/api/job", "/api/ranks", "/api/metrics", "/api/timeline",
                             "/api/stragglers", "/api/trace", "/metrics"})
    (void)dashboard::route(target, ctx);
}

}  // namespace mddp::fuzz
