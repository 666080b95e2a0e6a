// How the worker makes a control-plane call (worker/coordinator_client.cc
// and its streams): every call has a deadline and waits for the channel to
// become ready within it, instead of failing at once while the coordinator
// is starting or paused; a unary call that fails is one CoordinatorError
// naming the call (coordinator_error.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "proto/microddp.grpc.pb.h"
#include "worker/coordinator_error.h"

namespace mddp::worker {

inline std::chrono::system_clock::time_point after(Millis d) {
  return std::chrono::system_clock::now() + d;
}

// A deadline, and wait for the channel to be ready within it.
inline void prepare(grpc::ClientContext& ctx, Millis deadline) {
  ctx.set_deadline(after(deadline));
  ctx.set_wait_for_ready(true);
}

// A unary method of the coordinator's stub: &v1::Coordinator::Stub::Leave.
template <typename Request, typename Reply>
using Unary = grpc::Status (v1::Coordinator::Stub::*)(grpc::ClientContext*, const Request&, Reply*);

// One unary call within `deadline`; its status (for the callers that read a
// failure themselves).
template <typename Request, typename Reply>
grpc::Status try_call(v1::Coordinator::Stub& stub, Unary<Request, Reply> method,
                      const Request& request, Reply& reply, Millis deadline) {
  grpc::ClientContext ctx;
  prepare(ctx, deadline);
  return (stub.*method)(&ctx, request, &reply);
}

// One unary call within `deadline`: the reply, or the CoordinatorError that
// names `call` and the coordinator at `address`.
template <typename Request, typename Reply>
Reply call(v1::Coordinator::Stub& stub, Unary<Request, Reply> method, const Request& request,
           Millis deadline, const std::string& call_name, const std::string& address) {
  Reply reply;
  const grpc::Status s = try_call(stub, method, request, reply, deadline);
  if (!s.ok()) throw call_error(call_name, address, s, deadline);
  return reply;
}

}  // namespace mddp::worker
