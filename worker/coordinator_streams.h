// The two streaming calls of the worker (proto: StreamMetrics, Watch) over
// gRPC: what CoordinatorClient::open_metrics_stream and open_watch return.
// Each starts its call on first use, not when made, so that its owner can
// cancel() a call still waiting for the channel.
#pragma once

#include <memory>
#include <string>

#include "proto/microddp.grpc.pb.h"
#include "worker/coordinator_client.h"

namespace mddp::worker {

// A StreamMetrics call of `session` (of `attempt`) that must finish within `deadline`.
std::unique_ptr<MetricsStream> grpc_metrics_stream(v1::Coordinator::Stub& stub,
                                                   const std::string& session, int attempt,
                                                   const std::string& address, Millis deadline);
// A Watch call of `session`, with no deadline: it lives as long as the job.
std::unique_ptr<WatchStream> grpc_watch_stream(v1::Coordinator::Stub& stub,
                                               const std::string& session,
                                               const std::string& address);

}  // namespace mddp::worker
