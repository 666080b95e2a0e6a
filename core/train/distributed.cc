#include "core/train/distributed.h"

namespace mddp::train {

comm::CommOptions comm_options(const TrainConfig& cfg) {
  comm::CommOptions o;
  o.algorithm = comm::parse_algorithm(cfg.dist.algorithm);
  o.timeout = std::chrono::milliseconds(cfg.dist.timeout_ms);
  return o;
}

namespace {
ddp::DdpOptions ddp_options(const TrainConfig& cfg) {
  ddp::DdpOptions o;
  o.sync.mode = ddp::parse_mode(cfg.dist.ddp);
  o.sync.bucket_mb = cfg.dist.bucket_mb;
  o.sync.first_bucket_mb = cfg.dist.first_bucket_mb;
  o.sync.compress = ddp::parse_compression(cfg.dist.compress);
  o.local_sgd = cfg.dist.local_sgd;
  return o;
}
}  // namespace

DistributedTrainer::DistributedTrainer(const TrainConfig& cfg, std::unique_ptr<comm::Communicator> comm)
    : comm_(std::move(comm)), trainer_(cfg, comm_->rank(), comm_->size()) {
  ddp_ = std::make_unique<ddp::DistributedDataParallel>(trainer_.model(), *comm_, ddp_options(cfg));
  LoopHooks& h = hooks_;
  h.step.before_backward = [this](bool last) { ddp_->before_backward(last); };
  h.step.after_backward = [this] { ddp_->after_backward(); };
  h.step.after_optimizer = [this](int64_t step) { ddp_->after_optimizer(step); };
  h.global_mean = [this](double v) { return ddp_->mean_over_ranks(v); };
  h.print = comm_->rank() == 0;
}

StepResult DistributedTrainer::step() { return trainer_.step(hooks_.step); }

perf::StepMetrics DistributedTrainer::metrics(const StepResult& r) const {
  const ddp::SyncStats& s = ddp_->last_stats();
  perf::StepMetrics m;
  m.rank = comm_->rank();
  m.step = r.step;
  m.loss = r.loss;
  m.data_ms = r.times.data;
  m.forward_ms = r.times.forward;
  m.backward_ms = r.times.backward;
  m.exposed_comm_ms = r.times.sync;
  m.optimizer_ms = r.times.optimizer;
  m.step_ms = r.times.total;
  m.total_comm_ms = s.total_ms;
  m.comm_bytes = s.bytes;
  m.buckets = s.spans;
  return m;
}

}  // namespace mddp::train
