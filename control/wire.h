// Conversions between the control-plane messages (proto/microddp.proto) and
// the plain structs of control/ and core/. Shared by the coordinator
// (coordinator/service.cc) and the worker's client
// (worker/coordinator_client.cc), so both read the wire the same way.
#pragma once

#include <cstdint>

#include "control/fingerprint.h"
#include "control/job_status.h"
#include "control/join_request.h"
#include "control/metrics_record.h"
#include "control/progress.h"
#include "control/verdict.h"
#include "core/comm/types.h"
#include "core/perf/step_metrics.h"
#include "proto/microddp.pb.h"

namespace mddp::control {

JoinRequest from_proto(const v1::JoinRequest& m);

Resources from_proto(const v1::Resources& m);
void to_proto(const Resources& r, v1::Resources* out);

Fingerprint from_proto(const v1::Fingerprint& m);
void to_proto(const Fingerprint& f, v1::Fingerprint* out);

Progress from_proto(const v1::Progress& m);
void to_proto(const Progress& p, v1::Progress* out);

v1::JobState to_proto(State s);
State from_proto(v1::JobState s);

void to_proto(const Verdict& v, v1::Verdict* out);
Verdict from_proto(const v1::Verdict& m);  // an unknown cause reads as Cause::kNone

v1::PeerFault to_proto(comm::PeerFault f);
comm::PeerFault from_proto(v1::PeerFault f);  // unknown values read as kUnknown

comm::AlgoStep from_proto(const v1::AlgoStep& m);  // an unknown phase throws InputError
void to_proto(const comm::AlgoStep& s, v1::AlgoStep* out);

// A record as received (rank left 0: the coordinator sets it from the session).
MetricsRecord from_proto(const v1::StepMetrics& m);
void to_proto(const perf::StepMetrics& m, int64_t time_unix_ns, v1::StepMetrics* out);

}  // namespace mddp::control
