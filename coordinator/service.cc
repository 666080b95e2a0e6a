#include "coordinator/service.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "control/wire.h"

namespace mddp::coordinator {
namespace {

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The earliest of: now + the requested wait (kDefaultWait when <= 0, at most
// kMaxWait) and the client's gRPC deadline.
TimePoint deadline_of(const grpc::CallbackServerContext* ctx, int64_t timeout_ms, TimePoint now) {
  std::chrono::milliseconds wait =
      timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms) : kDefaultWait;
  wait = std::min(wait, kMaxWait);
  TimePoint deadline = now + wait;
  const auto client = ctx->deadline();  // system clock; far future when the client set none
  const auto left = client - std::chrono::system_clock::now();
  if (left < wait) deadline = now + std::chrono::duration_cast<Clock::duration>(left);
  return deadline;
}

// The shared part of a waiting call: the ticket of its wait in Job, and
// whether the client cancelled. Outlives the reactor when the wait answers
// before join/get/... returns.
struct WaitState {
  std::mutex mu;
  bool cancelled = false;
  Ticket ticket;
};

// A unary call that waits in Job. OnCancel (client gone, deadline, server
// shutdown) cancels the wait, whose callback then finishes the call.
class WaitingCall final : public grpc::ServerUnaryReactor {
 public:
  explicit WaitingCall(Job& job) : job_(job), state_(std::make_shared<WaitState>()) {}
  std::shared_ptr<WaitState> state() const { return state_; }

  void OnCancel() override {
    Ticket t;
    {
      std::lock_guard lock(state_->mu);
      state_->cancelled = true;
      t = state_->ticket;
    }
    job_.cancel(t);
  }
  void OnDone() override { delete this; }

 private:
  Job& job_;
  std::shared_ptr<WaitState> state_;
};

// Records the ticket of a wait just started; cancels it at once when the
// client already went away. Touches only the shared state: the call itself
// may have finished and been deleted by now.
void track(Job& job, const std::shared_ptr<WaitState>& state, Ticket ticket) {
  bool cancel;
  {
    std::lock_guard lock(state->mu);
    state->ticket = ticket;
    cancel = state->cancelled;
  }
  if (cancel) job.cancel(ticket);
}

grpc::ServerUnaryReactor* finish_now(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// Reads the metrics batches of one stream into Job, then acknowledges the count.
class MetricsReader final : public grpc::ServerReadReactor<v1::MetricsBatch> {
 public:
  MetricsReader(Job& job, v1::MetricsAck* ack, std::string peer)
      : job_(job), ack_(ack), peer_(std::move(peer)) {
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing (or the call was cancelled)
      spdlog::info("metrics stream from rank {} closed: {} records", rank_, count_);
      ack_->set_count(count_);
      Finish(grpc::Status::OK);
      return;
    }
    if (session_.empty()) session_ = batch_.session();
    if (batch_.session() != session_) {
      Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a metrics stream carries one session"));
      return;
    }
    std::vector<MetricsRecord> records;
    records.reserve(static_cast<std::size_t>(batch_.steps_size()));
    const int64_t received = unix_ns();
    try {
      for (const auto& s : batch_.steps()) {
        records.push_back(from_proto(s));
        records.back().received_unix_ns = received;
      }
    } catch (const InputError& e) {  // a step's phase this coordinator does not know
      Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, str("bad metrics record: ", e.what())));
      return;
    }
    const auto n = static_cast<int64_t>(records.size());
    const Job::Reply reply = job_.metrics(session_, batch_.attempt(), std::move(records));
    if (!reply.outcome.ok()) {
      spdlog::warn("metrics stream from {} refused: {}", peer_, reply.outcome.message);
      Finish(to_status(reply.outcome));
      return;
    }
    if (rank_ < 0) spdlog::info("metrics stream from rank {} opened", reply.rank);
    rank_ = reply.rank;
    count_ += n;
    batch_.Clear();
    StartRead(&batch_);
  }
  void OnDone() override { delete this; }

 private:
  Job& job_;
  v1::MetricsAck* ack_;
  const std::string peer_;
  v1::MetricsBatch batch_;
  std::string session_;
  int rank_ = -1;
  int64_t count_ = 0;
};

// The verdict rides along when the job failed, or the caller's attempt ended.
bool has_verdict(const JobStatus& s) {
  return s.state == State::kFailed || s.state == State::kRestarting;
}

void to_event(const JobStatus& s, v1::JobEvent* out) {
  out->set_state(to_proto(s.state));
  if (has_verdict(s)) to_proto(s.verdict, out->mutable_verdict());
}

// One Watch stream: writes the job's state at once, then its terminal state
// when the job ends (the verdict, within milliseconds of it), and finishes
// when the job is over or the client goes away. Ending before its rank left,
// it tells Job the rank disconnected (Job::unwatch). Job's callback reaches
// the reactor through `Shared`, which OnDone detaches before the reactor is
// deleted; every reactor member is guarded by Shared::mu.
class JobWatcher final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  JobWatcher(Job& job, const std::string& session)
      : job_(job), shared_(std::make_shared<Shared>()) {
    shared_->live = this;
    const std::weak_ptr<Shared> weak = shared_;
    const Job::WatchReply r =
        job_.watch(session, Clock::now(), [weak](const JobStatus& status, bool finished) {
          const auto shared = weak.lock();
          if (!shared) return;
          std::lock_guard lock(shared->mu);
          if (shared->live) shared->live->post_locked(status, finished);
        });
    std::lock_guard lock(shared_->mu);
    if (!r.outcome.ok()) {
      finish_locked(to_status(r.outcome));
      return;
    }
    id_ = r.id;
    post_locked(r.status,
                r.finished);  // a session of an ended attempt hears RESTARTING, and that is all
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(shared_->mu);
    writing_ = false;
    pending_.pop_front();
    if (!ok) cancelled_ = finish_wanted_ = true;  // the client is gone
    pump_locked();
  }
  void OnCancel() override {  // the client closed it, or its connection broke
    job_.unwatch(id_, Clock::now());
    std::lock_guard lock(shared_->mu);
    cancelled_ = finish_wanted_ = true;
    status_ = grpc::Status::CANCELLED;
    pump_locked();
  }
  void OnDone() override {
    {
      std::lock_guard lock(shared_->mu);
      shared_->live = nullptr;
    }
    job_.unwatch(id_, Clock::now());  // no-op when OnCancel did it
    delete this;
  }

 private:
  struct Shared {
    std::mutex mu;
    JobWatcher* live = nullptr;
  };

  void post_locked(const JobStatus& status, bool finished) {
    if (finished_) return;
    if (!sent_terminal_) {
      sent_terminal_ = status.terminal() || status.state == State::kRestarting;
      pending_.emplace_back();
      to_event(status, &pending_.back());
    }
    if (finished) finish_wanted_ = true;  // the job is over: nothing more to say
    pump_locked();
  }
  void pump_locked() {
    if (finished_ || writing_) return;
    if (!pending_.empty() && !cancelled_) {
      writing_ = true;
      StartWrite(&pending_.front());  // stays valid until OnWriteDone pops it
    } else if (finish_wanted_) {
      finish_locked(status_);
    }
  }
  void finish_locked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    Finish(std::move(status));
  }

  Job& job_;
  const std::shared_ptr<Shared> shared_;
  uint64_t id_ = 0;
  std::deque<v1::JobEvent> pending_;  // front: being written while writing_
  bool writing_ = false, sent_terminal_ = false, cancelled_ = false, finish_wanted_ = false,
       finished_ = false;
  grpc::Status status_ = grpc::Status::OK;
};

}  // namespace

grpc::Status to_status(const Outcome& o) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::UNKNOWN;
  switch (o.code) {
    case Code::kOk:
      return grpc::Status::OK;
    case Code::kInvalidArgument:
      code = StatusCode::INVALID_ARGUMENT;
      break;
    case Code::kUnauthenticated:
      code = StatusCode::UNAUTHENTICATED;
      break;
    case Code::kFailedPrecondition:
      code = StatusCode::FAILED_PRECONDITION;
      break;
    case Code::kAlreadyExists:
      code = StatusCode::ALREADY_EXISTS;
      break;
    case Code::kResourceExhausted:
      code = StatusCode::RESOURCE_EXHAUSTED;
      break;
    case Code::kDeadlineExceeded:
      code = StatusCode::DEADLINE_EXCEEDED;
      break;
    case Code::kAborted:
      code = StatusCode::ABORTED;
      break;
    case Code::kCancelled:
      code = StatusCode::CANCELLED;
      break;
  }
  return grpc::Status(code, o.message);
}

grpc::ServerUnaryReactor* Service::Hello(grpc::CallbackServerContext* ctx,
                                         const v1::HelloRequest* req, v1::HelloReply* reply) {
  const Admission::Challenge c =
      job_.hello(req->job_id(), req->protocol_version(), ctx->peer(), Clock::now());
  if (c.outcome.ok()) {
    reply->set_server_nonce(c.server_nonce);
    reply->set_expires_ms(c.expires.count());
  }
  return finish_now(ctx, to_status(c.outcome));
}

grpc::ServerUnaryReactor* Service::Join(grpc::CallbackServerContext* ctx,
                                        const v1::JoinRequest* req, v1::JoinReply* reply) {
  auto* call = new WaitingCall(job_);
  const auto state = call->state();
  const TimePoint now = Clock::now();
  // The rendezvous window bounds the wait (a restart opens another one);
  // the client's deadline may cut it shorter.
  const TimePoint deadline =
      deadline_of(ctx, (2 * job_.options().rendezvous_timeout + kDefaultWait).count(), now);
  JoinRequest request = from_proto(*req);
  request.peer = ctx->peer();
  const Ticket t = job_.join(std::move(request), deadline, now, [this, call, reply](JoinResult r) {
    if (r.outcome.ok() && r.prepare) {
      reply->set_prepare(true);
      reply->set_world_size(r.world_size);
      reply->set_job_config_json(job_.newcomer_config());
      reply->set_job_id(job_.options().job_id);
    } else if (r.outcome.ok()) {
      const JobOptions& o = job_.options();
      reply->set_session(r.self.session);
      reply->set_rank(r.self.rank);
      reply->set_world_size(r.world_size);
      reply->set_job_config_json(job_.config_for(r.attempt));
      reply->set_heartbeat_interval_ms(o.heartbeat_interval.count());
      reply->set_heartbeat_timeout_ms(o.heartbeat_timeout.count());
      reply->set_job_id(o.job_id);
      reply->set_attempt(r.attempt);
      reply->set_attempt_nonce(r.attempt_nonce);
    }
    call->Finish(to_status(r.outcome));
  });
  track(job_, state, t);
  return call;
}

grpc::ServerUnaryReactor* Service::Validate(grpc::CallbackServerContext* ctx,
                                            const v1::ValidateRequest* req, v1::ValidateReply*) {
  auto* call = new WaitingCall(job_);
  const auto state = call->state();
  const TimePoint now = Clock::now();
  const Ticket t = job_.validate(req->session(), from_proto(req->fingerprint()),
                                 deadline_of(ctx, req->timeout_ms(), now), now,
                                 [call](Outcome o) { call->Finish(to_status(o)); });
  track(job_, state, t);
  return call;
}

grpc::ServerUnaryReactor* Service::Set(grpc::CallbackServerContext* ctx, const v1::SetRequest* req,
                                       v1::SetReply*) {
  return finish_now(ctx, to_status(job_.set(req->session(), req->key(), req->value())));
}

grpc::ServerUnaryReactor* Service::Get(grpc::CallbackServerContext* ctx, const v1::GetRequest* req,
                                       v1::GetReply* reply) {
  auto* call = new WaitingCall(job_);
  const auto state = call->state();
  const TimePoint now = Clock::now();
  const Ticket t = job_.get(req->session(), req->key(), deadline_of(ctx, req->timeout_ms(), now),
                            now, [call, reply](Outcome o, std::string value) {
                              if (o.ok()) reply->set_value(std::move(value));
                              call->Finish(to_status(o));
                            });
  track(job_, state, t);
  return call;
}

grpc::ServerUnaryReactor* Service::Barrier(grpc::CallbackServerContext* ctx,
                                           const v1::BarrierRequest* req, v1::BarrierReply* reply) {
  auto* call = new WaitingCall(job_);
  const auto state = call->state();
  const TimePoint now = Clock::now();
  const Ticket t =
      job_.barrier(req->session(), req->name(), deadline_of(ctx, req->timeout_ms(), now), now,
                   [call, reply](Outcome o, int64_t generation) {
                     reply->set_generation(generation);
                     call->Finish(to_status(o));
                   });
  track(job_, state, t);
  return call;
}

grpc::ServerUnaryReactor* Service::Heartbeat(grpc::CallbackServerContext* ctx,
                                             const v1::HeartbeatRequest* req,
                                             v1::HeartbeatReply* reply) {
  reply->set_coordinator_receive_unix_ns(unix_ns());
  reply->set_client_send_unix_ns(req->client_send_unix_ns());
  std::optional<Resources> resources;
  if (req->has_resources()) resources = from_proto(req->resources());
  const Job::Reply r =
      job_.heartbeat(req->session(), from_proto(req->progress()), Clock::now(), resources);
  if (!r.outcome.ok()) return finish_now(ctx, to_status(r.outcome));
  reply->set_state(to_proto(r.status.state));
  reply->set_attempt(r.status.attempt);
  if (has_verdict(r.status)) to_proto(r.status.verdict, reply->mutable_verdict());
  return finish_now(ctx, grpc::Status::OK);
}

grpc::ServerReadReactor<v1::MetricsBatch>* Service::StreamMetrics(grpc::CallbackServerContext* ctx,
                                                                  v1::MetricsAck* ack) {
  return new MetricsReader(job_, ack, ctx->peer());
}

grpc::ServerUnaryReactor* Service::Leave(grpc::CallbackServerContext* ctx,
                                         const v1::LeaveRequest* req, v1::LeaveReply* reply) {
  const Job::Reply r = job_.leave(req->session(), req->ok(), req->message(), Clock::now());
  if (!r.outcome.ok()) return finish_now(ctx, to_status(r.outcome));
  reply->set_state(to_proto(r.status.state));
  if (has_verdict(r.status)) to_proto(r.status.verdict, reply->mutable_verdict());
  return finish_now(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::JobEvent>* Service::Watch(grpc::CallbackServerContext*,
                                                       const v1::WatchRequest* req) {
  return new JobWatcher(job_, req->session());
}

grpc::ServerUnaryReactor* Service::ReportPeerFault(grpc::CallbackServerContext* ctx,
                                                   const v1::PeerFaultReport* req,
                                                   v1::PeerFaultReply* reply) {
  const Job::Reply r = job_.report_peer_fault(req->session(), req->peer(), from_proto(req->fault()),
                                              req->detail(), Clock::now());
  if (!r.outcome.ok()) return finish_now(ctx, to_status(r.outcome));
  reply->set_state(to_proto(r.status.state));
  if (has_verdict(r.status)) to_proto(r.status.verdict, reply->mutable_verdict());
  return finish_now(ctx, grpc::Status::OK);
}

}  // namespace mddp::coordinator
