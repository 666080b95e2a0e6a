#include "control/wire.h"

namespace mddp::control {

JoinRequest from_proto(const v1::JoinRequest& m) {
  JoinRequest r;
  r.job_id = m.job_id();
  r.protocol_version = m.protocol_version();
  r.host = m.host();
  r.data_addr = m.data_addr();
  r.device = m.device();
  r.requested_rank = m.has_requested_rank() && m.requested_rank() >= 0 ? m.requested_rank() : -1;
  r.pid = m.pid();
  r.client_nonce = m.client_nonce();
  r.server_nonce = m.server_nonce();
  r.proof = m.proof();
  r.ready = m.ready();
  return r;
}

Resources from_proto(const v1::Resources& m) {
  return Resources{m.device(), m.threads(), m.cpus()};
}

void to_proto(const Resources& r, v1::Resources* out) {
  out->set_device(r.device);
  out->set_threads(r.threads);
  out->set_cpus(r.cpus);
}

Fingerprint from_proto(const v1::Fingerprint& m) {
  Fingerprint f;
  f.model = m.model();
  for (const auto& p : m.parameters())
    f.parameters.push_back({p.name(), {p.shape().begin(), p.shape().end()}});
  for (const auto& b : m.buckets())
    f.buckets.emplace_back(b.parameters().begin(), b.parameters().end());
  f.dtype = m.dtype();
  f.version = m.version();
  return f;
}

void to_proto(const Fingerprint& f, v1::Fingerprint* out) {
  out->set_model(f.model);
  for (const auto& p : f.parameters) {
    auto* q = out->add_parameters();
    q->set_name(p.name);
    for (int64_t d : p.shape) q->add_shape(d);
  }
  for (const auto& b : f.buckets) {
    auto* q = out->add_buckets();
    for (int64_t i : b) q->add_parameters(i);
  }
  out->set_dtype(f.dtype);
  out->set_version(f.version);
}

Progress from_proto(const v1::Progress& m) {
  Progress p;
  p.step = m.step();
  p.phase = m.phase().empty() ? "setup" : m.phase();
  p.collective_entered = m.collective_entered();
  p.collective_completed = m.collective_completed();
  p.op = m.op();
  p.bucket = m.has_bucket() ? m.bucket() : -1;
  p.total_steps = m.total_steps();
  return p;
}

void to_proto(const Progress& p, v1::Progress* out) {
  out->set_step(p.step);
  out->set_phase(p.phase);
  out->set_collective_entered(p.collective_entered);
  out->set_collective_completed(p.collective_completed);
  out->set_op(p.op);
  if (p.bucket >= 0) out->set_bucket(p.bucket);
  out->set_total_steps(p.total_steps);
}

v1::JobState to_proto(State s) {
  switch (s) {
    case State::kForming:
      return v1::JOB_STATE_FORMING;
    case State::kRunning:
      return v1::JOB_STATE_RUNNING;
    case State::kRestarting:
      return v1::JOB_STATE_RESTARTING;
    case State::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case State::kFailed:
      return v1::JOB_STATE_FAILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

State from_proto(v1::JobState s) {
  switch (s) {
    case v1::JOB_STATE_RUNNING:
      return State::kRunning;
    case v1::JOB_STATE_RESTARTING:
      return State::kRestarting;
    case v1::JOB_STATE_SUCCEEDED:
      return State::kSucceeded;
    case v1::JOB_STATE_FAILED:
      return State::kFailed;
    default:
      return State::kForming;
  }
}

// Cause and comm::PeerFault are numbered as their proto enums (FailureCause,
// PeerFault), so they convert by value.
static_assert(static_cast<int>(Cause::kGrow) == v1::FAILURE_CAUSE_GROW &&
              static_cast<int>(Cause::kProcessDied) == v1::FAILURE_CAUSE_PROCESS_DIED);
static_assert(static_cast<int>(comm::PeerFault::kDied) == v1::PEER_FAULT_DIED &&
              static_cast<int>(comm::PeerFault::kReset) == v1::PEER_FAULT_RESET);

void to_proto(const Verdict& v, v1::Verdict* out) {
  out->set_cause(static_cast<v1::FailureCause>(v.cause));
  out->set_rank(v.rank);
  out->set_peer(v.peer);
  out->set_host(v.host);
  out->set_pid(v.pid);
  out->set_doing(v.doing);
  out->set_message(v.message);
}

Verdict from_proto(const v1::Verdict& m) {
  Verdict v;
  v.cause = v1::FailureCause_IsValid(m.cause()) ? static_cast<Cause>(m.cause()) : Cause::kNone;
  v.rank = m.rank();
  v.peer = m.peer();
  v.host = m.host();
  v.pid = m.pid();
  v.doing = m.doing();
  v.message = m.message();
  return v;
}

v1::PeerFault to_proto(comm::PeerFault f) {
  return static_cast<v1::PeerFault>(f);
}

comm::PeerFault from_proto(v1::PeerFault f) {
  return v1::PeerFault_IsValid(f) ? static_cast<comm::PeerFault>(f) : comm::PeerFault::kUnknown;
}

comm::AlgoStep from_proto(const v1::AlgoStep& m) {
  comm::AlgoStep s{.index = m.index(),
                   .send_peer = m.send_peer(),
                   .recv_peer = m.recv_peer(),
                   .send_block = m.send_block(),
                   .recv_block = m.recv_block(),
                   .send_bytes = m.send_bytes(),
                   .recv_bytes = m.recv_bytes(),
                   .start_ns = m.start_ns(),
                   .end_ns = m.end_ns()};
  comm::parse_phase_name(m.phase(), s);
  return s;
}

void to_proto(const comm::AlgoStep& s, v1::AlgoStep* out) {
  out->set_phase(comm::phase_name(s));
  out->set_index(s.index);
  out->set_send_peer(s.send_peer);
  out->set_send_block(s.send_block);
  out->set_recv_peer(s.recv_peer);
  out->set_recv_block(s.recv_block);
  out->set_send_bytes(s.send_bytes);
  out->set_recv_bytes(s.recv_bytes);
  out->set_start_ns(s.start_ns);
  out->set_end_ns(s.end_ns);
}

MetricsRecord from_proto(const v1::StepMetrics& m) {
  MetricsRecord r;
  perf::StepMetrics& s = r.metrics;
  s.step = m.step();
  s.loss = m.loss();
  s.data_ms = m.data_ms();
  s.forward_ms = m.forward_ms();
  s.backward_ms = m.backward_ms();
  s.exposed_comm_ms = m.exposed_comm_ms();
  s.total_comm_ms = m.total_comm_ms();
  s.optimizer_ms = m.optimizer_ms();
  s.step_ms = m.step_ms();
  s.comm_bytes = static_cast<std::size_t>(m.comm_bytes());
  s.grad_bytes = static_cast<std::size_t>(m.grad_bytes());
  s.sent_bytes = static_cast<std::size_t>(m.sent_bytes());
  s.samples = m.samples();
  s.tokens = m.tokens();
  for (const auto& b : m.buckets()) {
    comm::CommSpan& span = s.buckets.emplace_back();
    span.index = b.index();
    span.bytes = static_cast<std::size_t>(b.bytes());
    span.ready_ns = b.ready_ns();
    span.launch_ns = b.launch_ns();
    span.start_ns = b.start_ns();
    span.end_ns = b.end_ns();
    span.op = b.all_gather()       ? comm::SpanOp::kAllGather
              : b.reduce_scatter() ? comm::SpanOp::kReduceScatter
                                   : comm::SpanOp::kAllReduce;
    span.round = b.round();
    span.grad_bytes = static_cast<std::size_t>(b.grad_bytes());
    span.sent_bytes = static_cast<std::size_t>(b.sent_bytes());
    for (const auto& q : b.steps()) span.steps.push_back(from_proto(q));
  }
  s.start_ns = m.start_ns();
  s.clock_offset_ns = m.clock_offset_ns();
  s.eval = m.eval();
  s.eval_loss = m.eval_loss();
  s.eval_accuracy = m.eval_accuracy();
  s.eval_sample = m.eval_sample();
  r.time_unix_ns = m.time_unix_ns();
  return r;
}

void to_proto(const perf::StepMetrics& s, int64_t time_unix_ns, v1::StepMetrics* out) {
  out->set_step(s.step);
  out->set_loss(s.loss);
  out->set_data_ms(s.data_ms);
  out->set_forward_ms(s.forward_ms);
  out->set_backward_ms(s.backward_ms);
  out->set_exposed_comm_ms(s.exposed_comm_ms);
  out->set_total_comm_ms(s.total_comm_ms);
  out->set_optimizer_ms(s.optimizer_ms);
  out->set_step_ms(s.step_ms);
  out->set_comm_bytes(static_cast<int64_t>(s.comm_bytes));
  out->set_grad_bytes(static_cast<int64_t>(s.grad_bytes));
  out->set_sent_bytes(static_cast<int64_t>(s.sent_bytes));
  out->set_samples(s.samples);
  out->set_tokens(s.tokens);
  out->set_start_ns(s.start_ns);
  out->set_clock_offset_ns(s.clock_offset_ns);
  out->set_eval(s.eval);
  out->set_eval_loss(s.eval_loss);
  out->set_eval_accuracy(s.eval_accuracy);
  out->set_eval_sample(s.eval_sample);
  for (const auto& b : s.buckets) {
    auto* q = out->add_buckets();
    q->set_index(b.index);
    q->set_bytes(static_cast<int64_t>(b.bytes));
    q->set_ready_ns(b.ready_ns);
    q->set_launch_ns(b.launch_ns);
    q->set_start_ns(b.start_ns);
    q->set_end_ns(b.end_ns);
    q->set_all_gather(b.op == comm::SpanOp::kAllGather);
    q->set_reduce_scatter(b.op == comm::SpanOp::kReduceScatter);
    q->set_round(b.round);
    q->set_grad_bytes(static_cast<int64_t>(b.grad_bytes));
    q->set_sent_bytes(static_cast<int64_t>(b.sent_bytes));
    for (const auto& step : b.steps) to_proto(step, q->add_steps());
  }
  out->set_time_unix_ns(time_unix_ns);
}

}  // namespace mddp::control
