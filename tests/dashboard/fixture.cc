#include "fixture.h"

#include <chrono>

#include "control/proof.h"
#include "core/common/hmac.h"

namespace mddp::dashboard::test {

using namespace coordinator;

namespace {
JobOptions options() {
  JobOptions o;
  o.world_size = DashboardTest::kWorld;
  o.heartbeat_timeout = std::chrono::minutes(10);  // the test's ranks only beat once
  return o;
}
}  // namespace

DashboardTest::DashboardTest() : job_(options()) {
  const auto now = Clock::now();
  for (int r = 0; r < kWorld; ++r) {
    JoinRequest req;
    req.job_id = "local";
    req.protocol_version = kProtocolVersion;
    req.host = "host" + std::to_string(r);
    req.device = "cpu";
    req.requested_rank = r;
    req.pid = 1000 + r;
    // No token: the proof made with the empty key (control/proof.h).
    req.server_nonce = job_.hello(req.job_id, kProtocolVersion, "test", now).server_nonce;
    req.client_nonce = random_bytes(kNonceBytes);
    req.proof = join_proof("", req.job_id, req.server_nonce, req.client_nonce, req.host, req.pid);
    job_.join(req, now + std::chrono::seconds(10), now,
              [this, r](JoinResult res) { sessions_[r] = res.self.session; });
  }
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(sessions_[r].empty()) << "rank " << r << " did not join";
    Progress p;
    p.step = 0;
    p.phase = "forward";
    p.total_steps = 1000;
    job_.heartbeat(sessions_[r], p, now);
  }
  serve();
}

DashboardTest::~DashboardTest() {
  server_.reset();
}

void DashboardTest::serve(const std::filesystem::path& dir,
                          std::chrono::milliseconds idle_timeout) {
  server_.reset();
  server_ = std::make_unique<Server>(
      ServerOptions{
          .host = "127.0.0.1", .port = 0, .dashboard_dir = dir, .idle_timeout = idle_timeout},
      job_);
}

void DashboardTest::feed(int64_t first, int64_t count, int only_rank) {
  constexpr int64_t kStepNs = 10'000'000;  // 10 ms a step
  constexpr int64_t kOffset = 1'700'000'000'000'000'000;
  for (int r = 0; r < kWorld; ++r) {
    if (only_rank >= 0 && r != only_rank) continue;
    std::vector<MetricsRecord> batch;
    for (int64_t s = first; s < first + count; ++s) {
      MetricsRecord rec;
      perf::StepMetrics& m = rec.metrics;
      m.step = s;
      m.loss = 2.0 / static_cast<double>(s + 1);
      m.data_ms = 0.5, m.forward_ms = 2 + r, m.backward_ms = 4, m.exposed_comm_ms = 1;
      m.total_comm_ms = 2, m.optimizer_ms = 0.5, m.step_ms = 8 + r;
      m.comm_bytes = 2 << 20;
      m.start_ns = s * kStepNs + r * 100'000;
      m.clock_offset_ns = kOffset;
      const int64_t ready = m.start_ns + 3'000'000 + r * 1'000'000;
      m.buckets = {
          {0, 1 << 20, ready, ready, ready + 100'000, ready + 600'000},
          {1, 1 << 20, ready + 2'000'000, ready + 2'000'000, ready + 2'100'000, ready + 2'600'000}};
      rec.time_unix_ns = kOffset + m.start_ns + 9'000'000;
      rec.received_unix_ns = rec.time_unix_ns + 1'000'000;
      batch.push_back(rec);
    }
    job_.metrics(sessions_[r], 0, std::move(batch));
  }
}

}  // namespace mddp::dashboard::test
