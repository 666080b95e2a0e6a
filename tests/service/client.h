// A minimal blocking client of the coordinator for the tests: one stub, and
// every call bounded by a gRPC deadline (kCallDeadline unless given).
#pragma once

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "control/proof.h"
#include "coordinator/job.h"
#include "core/common/hmac.h"
#include "proto/microddp.grpc.pb.h"

namespace mddp::coordinator::test {

constexpr std::chrono::seconds kCallDeadline{20};

class TestClient {
 public:
  explicit TestClient(const std::string& address)
      : stub_(v1::Coordinator::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  static v1::JoinRequest join_request(const std::string& host, int rank = -1) {
    v1::JoinRequest r;
    r.set_job_id("job");
    r.set_protocol_version(kProtocolVersion);
    r.set_host(host);
    r.set_data_addr("127.0.0.1");
    r.set_device("cpu");
    r.set_pid(::getpid());
    if (rank >= 0) r.set_requested_rank(rank);
    return r;
  }

  grpc::Status hello(const std::string& job_id, uint32_t version, v1::HelloReply* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::HelloRequest req;
    req.set_job_id(job_id);
    req.set_protocol_version(version);
    return stub_->Hello(&ctx, req, reply);
  }
  // Hello, then the proof of `token` over the server's nonce, into `req`
  // (as the worker does: control/proof.h).
  grpc::Status prove(v1::JoinRequest& req, const std::string& token) {
    v1::HelloReply challenge;
    grpc::Status s = hello(req.job_id(), req.protocol_version(), &challenge);
    if (!s.ok()) return s;
    req.set_server_nonce(challenge.server_nonce());
    req.set_client_nonce(random_bytes(kNonceBytes));
    req.set_proof(join_proof(token, req.job_id(), req.server_nonce(), req.client_nonce(),
                             req.host(), req.pid()));
    return s;
  }
  // Join as it is (no Hello first): a replayed or a hand-made request.
  grpc::Status join_as_is(const v1::JoinRequest& req, v1::JoinReply* reply,
                          std::chrono::milliseconds deadline = kCallDeadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    grpc::Status s = stub_->Join(&ctx, req, reply);
    if (s.ok()) session_ = reply->session();
    return s;
  }
  grpc::Status join(v1::JoinRequest req, v1::JoinReply* reply,
                    std::chrono::milliseconds deadline = kCallDeadline,
                    const std::string& token = "tok") {
    if (grpc::Status s = prove(req, token); !s.ok()) return s;
    return join_as_is(req, reply, deadline);
  }
  grpc::Status join(const std::string& host, const std::string& token = "tok", int rank = -1) {
    host_ = host;
    return join(join_request(host, rank), &joined_, kCallDeadline, token);
  }
  const v1::JoinReply& joined() const { return joined_; }
  const std::string& host() const { return host_; }  // as the last join(host) sent it
  const std::string& session() const { return session_; }

  grpc::Status validate(const v1::Fingerprint& fp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::ValidateRequest req;
    req.set_session(session_);
    *req.mutable_fingerprint() = fp;
    req.set_timeout_ms(10000);
    v1::ValidateReply reply;
    return stub_->Validate(&ctx, req, &reply);
  }
  grpc::Status set(const std::string& key, const std::string& value) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::SetRequest req;
    req.set_session(session_);
    req.set_key(key);
    req.set_value(value);
    v1::SetReply reply;
    return stub_->Set(&ctx, req, &reply);
  }
  grpc::Status get(const std::string& key, int64_t timeout_ms, std::string* value) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::GetRequest req;
    req.set_session(session_);
    req.set_key(key);
    req.set_timeout_ms(timeout_ms);
    v1::GetReply reply;
    grpc::Status s = stub_->Get(&ctx, req, &reply);
    *value = reply.value();
    return s;
  }
  grpc::Status barrier(const std::string& name, int64_t timeout_ms, int64_t* generation = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::BarrierRequest req;
    req.set_session(session_);
    req.set_name(name);
    req.set_timeout_ms(timeout_ms);
    v1::BarrierReply reply;
    grpc::Status s = stub_->Barrier(&ctx, req, &reply);
    if (generation) *generation = reply.generation();
    return s;
  }
  grpc::Status heartbeat(v1::HeartbeatReply* reply, int64_t step = 0,
                         const std::string& phase = "forward") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::HeartbeatRequest req;
    req.set_session(session_);
    req.mutable_progress()->set_step(step);
    req.mutable_progress()->set_phase(phase);
    req.set_client_send_unix_ns(12345);
    return stub_->Heartbeat(&ctx, req, reply);
  }
  // Opens this worker's Watch stream on `ctx` (which bounds and cancels it).
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> watch(grpc::ClientContext& ctx) {
    v1::WatchRequest req;
    req.set_session(session_);
    return stub_->Watch(&ctx, req);
  }
  grpc::Status report_peer_fault(int peer, v1::PeerFault fault, const std::string& detail,
                                 v1::PeerFaultReply* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::PeerFaultReport req;
    req.set_session(session_);
    req.set_peer(peer);
    req.set_fault(fault);
    req.set_detail(detail);
    return stub_->ReportPeerFault(&ctx, req, reply);
  }
  grpc::Status leave(bool ok, const std::string& message, v1::LeaveReply* reply = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::LeaveRequest req;
    req.set_session(session_);
    req.set_ok(ok);
    req.set_message(message);
    v1::LeaveReply r;
    return stub_->Leave(&ctx, req, reply ? reply : &r);
  }
  // Streams `steps` records in batches of `batch`; returns the ack's count (-1 on error).
  int64_t stream_metrics(int steps, int batch) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::MetricsAck ack;
    auto writer = stub_->StreamMetrics(&ctx, &ack);
    v1::MetricsBatch b;
    for (int s = 1; s <= steps; ++s) {
      auto* m = b.add_steps();
      m->set_step(s);
      m->set_loss(1.0 / s);
      m->set_step_ms(5);
      auto* span = m->add_buckets();
      span->set_index(0);
      span->set_bytes(4096);
      if (b.steps_size() == batch || s == steps) {
        b.set_session(session_);
        if (!writer->Write(b)) break;
        b.Clear();
      }
    }
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    return st.ok() ? ack.count() : -1;
  }

  v1::Coordinator::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  v1::JoinReply joined_;
  std::string host_;
  std::string session_;
};

}  // namespace mddp::coordinator::test
