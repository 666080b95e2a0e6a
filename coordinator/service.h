// The gRPC service: a thin translation of the Coordinator service
// (proto/microddp.proto) onto Job, on gRPC's callback API. Handlers never
// block a gRPC thread: a call that waits (Join, Validate, Get, Barrier)
// parks a callback in Job and finishes when Job answers
// (Note [Waits complete exactly once], outcome.h); if the client goes away first, its
// OnCancel cancels the wait. Watch streams stay open from a worker's join to
// its leave and carry the job's verdict to it at once. Every wait is bounded: by the request's
// timeout_ms (default kDefaultWait, at most kMaxWait), the client's gRPC
// deadline, and for Join the rendezvous timeout.
#pragma once

#include <chrono>

#include "coordinator/job.h"
#include "proto/microddp.grpc.pb.h"

namespace mddp::coordinator {

constexpr std::chrono::milliseconds kDefaultWait{std::chrono::minutes(1)};
constexpr std::chrono::milliseconds kMaxWait{std::chrono::hours(1)};

// Outcome -> grpc::Status (Code maps one to one onto grpc::StatusCode).
grpc::Status to_status(const Outcome& o);

class Service final : public v1::Coordinator::CallbackService {
 public:
  explicit Service(Job& job) : job_(job) {}

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const v1::HelloRequest* req,
                                  v1::HelloReply* reply) override;
  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
                                 v1::JoinReply* reply) override;
  grpc::ServerUnaryReactor* Validate(grpc::CallbackServerContext* ctx,
                                     const v1::ValidateRequest* req,
                                     v1::ValidateReply* reply) override;
  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx, const v1::SetRequest* req,
                                v1::SetReply* reply) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::GetRequest* req,
                                v1::GetReply* reply) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* ctx, const v1::BarrierRequest* req,
                                    v1::BarrierReply* reply) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatReply* reply) override;
  grpc::ServerReadReactor<v1::MetricsBatch>* StreamMetrics(grpc::CallbackServerContext* ctx,
                                                           v1::MetricsAck* ack) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx, const v1::LeaveRequest* req,
                                  v1::LeaveReply* reply) override;
  grpc::ServerWriteReactor<v1::JobEvent>* Watch(grpc::CallbackServerContext* ctx,
                                                const v1::WatchRequest* req) override;
  grpc::ServerUnaryReactor* ReportPeerFault(grpc::CallbackServerContext* ctx,
                                            const v1::PeerFaultReport* req,
                                            v1::PeerFaultReply* reply) override;

 private:
  Job& job_;
};

}  // namespace mddp::coordinator
