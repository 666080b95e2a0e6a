// The control plane's messages as the coordinator's handlers see them: a
// sequence of protobuf messages parsed from the input (any field, any size,
// any repeated count) and applied to a Job exactly as coordinator/service.cc
// applies them (wire.h conversions, then the Job call), with no network in
// between; then the dashboard reads the job through every route, since
// what ranks send ends up there. Refusals are Outcomes (gRPC statuses);
// a crash, an escaped exception or an internal check is a finding.
//
// Input: [bit 0: the job starts formed (2 ranks joined) or forming]
//        then records [kind][u16 length, little-endian][message bytes],
// kind % 9 = Join, Validate, Set, Get, Barrier, Heartbeat, MetricsBatch,
// Leave, Hello. A session "0".."9" stands for the session of the n-th rank that
// joined, so the fuzzer reaches past the session check.
#include "control/wire.h"
#include "proto/microddp.pb.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/job_fixture.h"

using namespace mddp;
using namespace mddp::coordinator;

namespace {

struct Replay {
  fuzz::JobFixture& f;
  TimePoint now;

  std::string session(const std::string& s) const {
    if (s.size() == 1 && s[0] >= '0' && s[0] <= '9') {
      const auto i = static_cast<std::size_t>(s[0] - '0');
      if (i < f.sessions.size()) return f.sessions[i];
    }
    return s;
  }
  TimePoint soon() const { return now + std::chrono::seconds(1); }

  template <class M>
  bool parse(M& m, const uint8_t* data, std::size_t size) {
    return m.ParseFromArray(data, static_cast<int>(size));
  }

  void apply(int kind, const uint8_t* data, std::size_t size) {
    Job& job = f.job;
    switch (kind) {
      case 0: {
        v1::JoinRequest m;
        if (parse(m, data, size))
          job.join(from_proto(m), soon(), now, [&fixture = f](JoinResult r) {
            if (r.outcome.ok()) fixture.sessions.push_back(r.self.session);
          });
        break;
      }
      case 1: {
        v1::ValidateRequest m;
        if (parse(m, data, size))
          job.validate(session(m.session()), from_proto(m.fingerprint()), soon(), now,
                       [](Outcome) {});
        break;
      }
      case 2: {
        v1::SetRequest m;
        if (parse(m, data, size)) (void)job.set(session(m.session()), m.key(), m.value());
        break;
      }
      case 3: {
        v1::GetRequest m;
        if (parse(m, data, size))
          job.get(session(m.session()), m.key(), soon(), now, [](Outcome, std::string) {});
        break;
      }
      case 4: {
        v1::BarrierRequest m;
        if (parse(m, data, size))
          job.barrier(session(m.session()), m.name(), soon(), now, [](Outcome, int64_t) {});
        break;
      }
      case 5: {
        v1::HeartbeatRequest m;
        if (!parse(m, data, size)) break;
        std::optional<Resources> resources;
        if (m.has_resources()) resources = from_proto(m.resources());
        (void)job.heartbeat(session(m.session()), from_proto(m.progress()), now, resources);
        break;
      }
      case 6: {
        v1::MetricsBatch m;
        if (!parse(m, data, size)) break;
        std::vector<MetricsRecord> records;
        for (const auto& s : m.steps()) records.push_back(from_proto(s));
        (void)job.metrics(session(m.session()), m.attempt(), std::move(records));
        break;
      }
      case 7: {
        v1::LeaveRequest m;
        if (parse(m, data, size)) (void)job.leave(session(m.session()), m.ok(), m.message(), now);
        break;
      }
      case 8: {
        v1::HelloRequest m;
        if (parse(m, data, size)) (void)job.hello(m.job_id(), m.protocol_version(), "fuzz", now);
        break;
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  fuzz::JobFixture fixture(/*joined=*/data[0] & 1);
  Replay replay{fixture, fixture.now};
  for (std::size_t at = 1; at + 3 <= size;) {
    const int kind = data[at] % 9;
    const std::size_t len =
        std::min<std::size_t>(data[at + 1] | (data[at + 2] << 8), size - at - 3);
    replay.apply(kind, data + at + 3, len);
    at += 3 + len;
    replay.now += std::chrono::milliseconds(1);
    fixture.job.tick(replay.now);
  }
  fixture.job.tick(replay.now + std::chrono::seconds(2));  // every wait expires
  fuzz::read_dashboard(fixture.job, replay.now);
  return 0;
}
