#include "core/train/distributed.h"

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>

#include "core/comm/gloo/gloo.h"
#include "core/common/sanitizers.h"
#include "core/common/test_mutation.h"
#include "core/common/timer.h"
#include "core/ddp/sharded_sync.h"
#include "core/tensor/device.h"
#include "core/tensor/ops.h"
#include "core/train/lab_fault.h"
#include "core/train/mixed_precision.h"
#include "core/train/replica_check.h"
#include "core/train/sharded_optimizer.h"
#include "core/train/word_collectives.h"

namespace mddp::train {

comm::CommOptions comm_options(const TrainConfig& cfg) {
  comm::CommOptions o;
  o.algorithm = comm::parse_algorithm(cfg.dist.algorithm);
  o.timeout = std::chrono::milliseconds(cfg.dist.timeout_ms);
  return o;
}

std::unique_ptr<comm::ProcessGroup> connect_process_group(
    comm::Store& store, int rank, int size, const comm::JobIdentity& job, const TrainConfig& cfg,
    const std::string& bind_host, const std::string& prefix, const comm::AbortSignal* setup_abort) {
  const tensor::Device device = tensor::Device::parse(cfg.device);
  tensor::require_available(device);  // the one clear line, before any rank waits on this one
  const std::string backend = process_group_backend(cfg);
  if (backend == "cpu") {
    comm::CommOptions options = comm_options(cfg);
    options.setup_abort = setup_abort;
    LabFault::from_environment().adjust_comm(rank, size, options);  // a diagnosis Lab's, if any
    return comm::connect(store, rank, size, job, comm::parse_transport(cfg.dist.transport), options,
                         bind_host, prefix);
  }
  if (backend == "gloo")
    return comm::gloo::connect_gloo(
        store, rank, size, {std::chrono::milliseconds(cfg.dist.timeout_ms), bind_host, prefix});
  comm::nccl::NcclOptions o;
  o.device = device.index;
  o.timeout = std::chrono::milliseconds(cfg.dist.timeout_ms);
  o.prefix = prefix + "/nccl";
  return comm::nccl::connect_nccl(store, rank, size, o);
}

namespace {
ddp::DdpOptions ddp_options(const TrainConfig& cfg) {
  ddp::DdpOptions o;
  o.sync.mode = ddp::parse_mode(cfg.dist.ddp);
  o.sync.bucket_mb = cfg.dist.bucket_mb;
  o.sync.first_bucket_mb = cfg.dist.first_bucket_mb;
  o.sync.compress = ddp::parse_compression(effective_compress(cfg));
  o.local_sgd = cfg.dist.local_sgd;
  return o;
}

// The step phases Trainer::step reports through on_phase, and where each
// one's time goes in StepTimes.
constexpr const char* kPhases[] = {"data", "forward", "backward", "sync", "optimizer"};
int phase_index(const char* phase) {  // -1: not a step phase (run_training's "eval", ...)
  for (std::size_t i = 0; i < std::size(kPhases); ++i)
    if (!std::strcmp(phase, kPhases[i])) return static_cast<int>(i);
  return -1;
}

// The phases of one step from its marks on the compute stream: each mark's
// phase lasts until the next mark ("end" closes the step). Micro-batches
// repeat data/forward/backward, so durations are summed per phase.
StepTimes phases_of(const std::vector<comm::nccl::PhaseMark>& marks) {
  StepTimes t;
  double* slots[] = {&t.data, &t.forward, &t.backward, &t.sync, &t.optimizer};
  for (std::size_t i = 0; i + 1 < marks.size(); ++i)
    if (const int k = phase_index(marks[i].name); k >= 0)
      *slots[k] += ns_to_ms(marks[i + 1].ns - marks[i].ns);
  if (marks.size() >= 2) t.total = ns_to_ms(marks.back().ns - marks.front().ns);
  return t;
}

// The planted bug clip_before_allreduce (core/common/test_mutation.h): each
// rank clips its own local gradient, and DDP then averages the clipped
// gradients. So backward does not synchronise; after it, the local clip,
// then every gradient's hook in the order backward fires them (reverse
// registration), and DDP's wait.
void plant_local_clipping(StepHooks& h, ddp::DistributedDataParallel& ddp, nn::Module& model,
                          float max_norm) {
  h.before_backward = [&ddp](bool) { ddp.before_backward(false); };
  h.after_backward = [&ddp, &model, max_norm] {
    const std::vector<nn::Parameter*> params = model.parameters();
    tensor::Tensor squares = tensor::Tensor::zeros({1}, params.front()->grad.device());
    for (nn::Parameter* p : params) tensor::sum_squares(p->grad, squares);
    const float norm = std::sqrt(squares.to_vector()[0]);
    if (norm > max_norm)
      for (nn::Parameter* p : params) tensor::scale(p->grad, max_norm / (norm + 1e-6f));
    ddp.before_backward(true);
    for (auto it = params.rbegin(); it != params.rend(); ++it)
      for (int use = 0; use < (*it)->uses; ++use) ddp.grad_sync().on_grad_ready(**it);
    ddp.after_backward();
  };
}

}  // namespace

DistributedTrainer::DistributedTrainer(const TrainConfig& cfg,
                                       std::shared_ptr<comm::ProcessGroup> comm)
    : DistributedTrainer(std::make_unique<Trainer>(cfg, comm->rank(), comm->size()), comm,
                         cfg.from_peers, nullptr) {}

DistributedTrainer::DistributedTrainer(std::unique_ptr<Trainer>& survivor,
                                       std::shared_ptr<comm::ProcessGroup> comm)
    : DistributedTrainer(std::move(survivor), std::move(comm), true, &survivor) {}

DistributedTrainer::~DistributedTrainer() = default;

std::unique_ptr<Trainer> DistributedTrainer::release_trainer() {
  ddp_.reset();
  return std::move(trainer_);
}

DistributedTrainer::DistributedTrainer(std::unique_ptr<Trainer> trainer,
                                       std::shared_ptr<comm::ProcessGroup> comm, bool reformed,
                                       std::unique_ptr<Trainer>* hand_back)
    : comm_(std::move(comm)),
      timeline_(dynamic_cast<comm::nccl::ComputeTimeline*>(comm_.get())),
      trainer_(std::move(trainer)) {
  // A newcomer built its trainer from the config: the job's state is the live ranks'.
  if (reformed && !hand_back) trainer_->set_holds_state(false);
  try {
    set_up(reformed);
  } catch (...) {
    ddp_.reset();  // the hooks come off the model
    if (hand_back) *hand_back = std::move(trainer_);
    throw;
  }
}

void DistributedTrainer::set_up(bool reformed) {
  const TrainConfig& cfg = trainer_->config();
  MDDP_CHECK(trainer_->rank() == comm_->rank() && trainer_->world_size() == comm_->size(),
             "a trainer of rank ", trainer_->rank(), " of ", trainer_->world_size(),
             " in a group where it is rank ", comm_->rank(), " of ", comm_->size());
  // A re-formed group agrees on the state first; then every rank holds it
  // and DDP need not send rank 0's weights again.
  if (reformed) take_furthest_state();
  ddp::DdpOptions options = ddp_options(cfg);
  options.broadcast_parameters = !reformed;
  ddp_ = std::make_unique<ddp::DistributedDataParallel>(trainer_->model(), *comm_, options);
  broadcast_training_state(0, !reformed);
  LoopHooks& h = hooks_;
  if (auto* sharded = dynamic_cast<ddp::ShardedSync*>(&ddp_->grad_sync())) {
    // ZeRO-1: the sharded optimiser takes over the broadcast state; before
    // each checkpoint rank 0 writes, every rank contributes its shard.
    auto opt = std::make_unique<ShardedOptimizer>(cfg.optim, trainer_->model().parameters(),
                                                  *sharded, *comm_, trainer_->optimizer());
    sharded_optimizer_ = opt.get();
    trainer_->set_optimizer(std::move(opt));
#if !defined(MDDP_TSAN) && !defined(MDDP_ASAN)
    // glibc would keep the unsharded state's freed heap pages resident. (A
    // sanitizer replaces malloc, and glibc's trim would walk arenas it never made.)
    malloc_trim(0);
#endif
  }
  h.before_checkpoint = [this](int64_t step, bool final) { at_step_end(step, final); };
  h.step.before_backward = [this](bool last) { ddp_->before_backward(last); };
  h.step.after_backward = [this] { ddp_->after_backward(); };
  if (test_mutation("clip_before_allreduce") && cfg.optim.grad_clip > 0.0f)
    plant_local_clipping(h.step, *ddp_, trainer_->model(), cfg.optim.grad_clip);
  h.step.after_optimizer = [this](int64_t step) { ddp_->after_optimizer(step); };
  if (timeline_) {
    // On a GPU the host only queues kernels, so host clocks would time the
    // launches; the marks time what the GPU did. `sync` then runs from when
    // the GPU finished backward to when the optimiser could start once every
    // bucket's all-reduce ended: the exposed communication.
    h.step.on_phase = [this](int64_t, const char* phase) {
      if (phase_index(phase) >= 0) timeline_->mark(phase);
    };
    h.step.after_optimizer = [this](int64_t step) {
      ddp_->after_optimizer(step);
      timeline_->mark("end");
      gpu_times_ = phases_of(timeline_->take_marks());
      gpu_times_step_ = step;
    };
  }
  h.global_mean = [this](double v) { return ddp_->mean_over_ranks(v); };
  h.print = comm_->rank() == 0;
}

// Note [Survivors train on]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// With --on-failure shrink or heal, the ranks that outlived a failed one
// re-form a smaller group inside their running processes and go on from
// the state they hold: no checkpoint is read. After every completed step
// the replicas are identical, and a step in flight when a rank died is
// abandoned on the ranks where it failed: its gradients are thrown away
// with the step, before the optimiser ran. But a step can complete on some
// survivors only: the dead rank's contribution was in, a survivor received
// every reduced bucket and stepped, while another still waited for a
// message the dead rank was to forward. Every gradient it used was
// complete, so that survivor's state is a correct one, one step further.
// So the ranks compare their step counts and all take the state of the
// furthest: at most the one step in flight is lost, and no rank keeps an
// update the others lack.
//
// A newcomer (heal: the dead rank started again, a replacement) holds no
// state and counts as the least far. The ranks at the furthest step hold
// the same state, so each chunk of it comes from one of them in turn: the
// copy is spread over the live ranks rather than all sent by rank 0. Then
// the replica check's hashes (replica_check.h) confirm, end to end, that
// every rank holds the same bytes, naming any rank that does not. While a
// copy into a survivor's trainer is under way, it holds no state: should
// the group fail meanwhile, that half-copied trainer does not count as a
// source at the next re-form. ZeRO-1 (a step half-gathered leaves mixed
// shards) and local SGD (replicas differ between averages) are refused.
void DistributedTrainer::take_furthest_state() {
  // 0: no state; else the steps done, plus 1.
  const uint64_t mine =
      trainer_->holds_state() ? static_cast<uint64_t>(trainer_->steps_done()) + 1 : 0;
  const tensor::Device device = tensor::Device::parse(trainer_->config().device);
  const std::vector<uint64_t> held = all_gather_words(*comm_, std::span(&mine, 1), device);
  const uint64_t furthest = *std::max_element(held.begin(), held.end());
  if (furthest == 0)
    throw Error(
        "no rank of the re-formed group holds the training state (every survivor lost it): "
        "restart the job from its last checkpoint (--resume RUN_DIR)");
  std::vector<int> sources;
  for (int r = 0; r < static_cast<int>(held.size()); ++r)
    if (held[static_cast<std::size_t>(r)] == furthest) sources.push_back(r);
  if (static_cast<int>(sources.size()) == comm_->size()) return;  // level: nothing moves
  const int64_t start = now_ns();
  trainer_->set_holds_state(mine == furthest);
  copy_state_from(sources);
  trainer_->set_holds_state(true);
  const int64_t copied = now_ns();
  check_replicas(*comm_, replica_digest(trainer_->model(), &trainer_->optimizer()),
                 trainer_->steps_done(), device);
  state_copy_.sources = static_cast<int>(sources.size());
  state_copy_.seconds = (copied - start) * 1e-9;
  state_copy_.check_seconds = (now_ns() - copied) * 1e-9;
}

// Every parameter and optimiser state tensor, in chunks of at most kChunk
// floats, chunk i from sources[i mod n]; then the counters from the first
// source. A chunk travels as an all-reduce (sum) of a staging buffer into
// which its source copies it and every other rank puts -0.0: the identity
// of IEEE addition (x + -0.0 is x bit for bit, +0.0, -0.0 and NaN
// included; with no flush-to-zero, which microddp never sets), so every
// rank ends with the chunk whatever the order of the sum. An all-reduce
// moves 2(n-1)/n of a chunk over each rank's link, every link busy at the
// transport's busbw, where a broadcast tree sends the whole chunk once per
// child from the root, the sources included. The sources' own tensors are
// never written: a copy cut short leaves them whole.
void DistributedTrainer::copy_state_from(const std::vector<int>& sources) {
  constexpr int64_t kChunk = int64_t{1} << 20;  // 4 MB
  std::vector<tensor::Tensor> tensors;          // handles on the trainer's storage
  for (nn::Parameter* p : trainer_->model().parameters()) tensors.push_back(p->value);
  for (auto& [name, t] : trainer_->optimizer().state()) tensors.push_back(t);
  const bool receives = !trainer_->holds_state();
  tensor::Tensor staging =
      tensor::Tensor::zeros({kChunk}, tensor::Device::parse(trainer_->config().device));
  std::size_t chunk = 0;
  for (const tensor::Tensor& t : tensors) {
    state_copy_.bytes += t.numel() * static_cast<int64_t>(sizeof(float));
    for (int64_t at = 0; at < t.numel(); at += kChunk, ++chunk) {
      const int64_t n = std::min(kChunk, t.numel() - at);
      tensor::Tensor part = t.view(at, {n}), stage = staging.view(0, {n});
      if (comm_->rank() == sources[chunk % sources.size()])
        tensor::copy(part, stage);
      else
        tensor::fill(stage, -0.0f);
      comm_->all_reduce(stage.data(), n, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
      if (receives) tensor::copy(stage, part);
    }
  }
  broadcast_training_state(sources.front(), false);
}

// DDP's constructor sent rank 0's weights; the rest of where training stands
// follows, so that every rank continues exactly where rank 0 (or `root`) does.
void DistributedTrainer::broadcast_training_state(int root, bool optimizer_state) {
  nn::Optimizer& opt = trainer_->optimizer();
  if (optimizer_state)
    for (auto& [name, t] : opt.state())
      comm_->broadcast(t.data(), t.numel(), comm::DataType::kFloat32, root)->wait();
  // The counters, bit for bit (word_collectives.h): the steps; rank 0's checkpoint schedule, which
  // the worker gives rank 0 alone (ZeRO-1's ranks all take part in a checkpoint); and fp16's loss
  // scaler, so that every rank takes rank 0's skip decisions.
  const TrainConfig& cfg = trainer_->config();
  const LossScaler& scaler = trainer_->loss_scaler();
  const auto word = [](int64_t v) { return static_cast<uint64_t>(v); };
  uint64_t counters[7] = {word(trainer_->steps_done()),
                          word(opt.steps()),
                          word(cfg.checkpoint_every),
                          cfg.run_dir.empty() ? 0u : 1u,
                          std::bit_cast<uint32_t>(scaler.scale()),
                          word(scaler.good_steps()),
                          word(scaler.skipped_steps())};
  broadcast_words(*comm_, counters, root, tensor::Device::parse(cfg.device));
  const auto count = [](uint64_t w) { return static_cast<int64_t>(w); };
  trainer_->set_steps_done(count(counters[0]));
  opt.set_steps(count(counters[1]));
  job_checkpoints_ = {count(counters[2]), counters[3] != 0};
  trainer_->set_loss_scaler_state(std::bit_cast<float>(static_cast<uint32_t>(counters[4])),
                                  count(counters[5]), count(counters[6]));
}

// Before each checkpoint rank 0 writes, every ZeRO-1 rank contributes its
// shard of the optimiser state; and the replica check runs when it is due.
void DistributedTrainer::at_step_end(int64_t step, bool final) {
  const bool checkpoint_due =
      job_checkpoints_.written &&
      (final || (job_checkpoints_.every > 0 && step % job_checkpoints_.every == 0));
  if (sharded_optimizer_ && checkpoint_due) sharded_optimizer_->gather_state();
  if (step == replicas_checked_at_ || !replica_check_due(step, checkpoint_due)) return;
  replicas_checked_at_ = step;
  const TrainConfig& cfg = trainer_->config();
  // ZeRO-1's optimiser state is a different shard on every rank, and local
  // SGD's moments follow each rank's own gradients: their parameters alone.
  nn::Optimizer* replicated_state =
      sharded_optimizer_ || cfg.dist.local_sgd > 0 ? nullptr : &trainer_->optimizer();
  check_replicas(*comm_, replica_digest(trainer_->model(), replicated_state), step,
                 tensor::Device::parse(cfg.device));
}

// The replica check's steps (Note [Replica check]): before each checkpoint,
// at each evaluation, and every --check-replicas-every steps (-1: never);
// with local SGD only where the parameters were just averaged (they differ
// between).
bool DistributedTrainer::replica_check_due(int64_t step, bool checkpoint_due) const {
  const TrainConfig& cfg = trainer_->config();
  const int64_t every = cfg.dist.check_replicas_every;
  if (every < 0) return false;
  if (cfg.dist.local_sgd > 0 && step % cfg.dist.local_sgd != 0) return false;
  const bool evaluates = cfg.eval && trainer_->ends_epoch(step);
  return checkpoint_due || evaluates || (every > 0 && step % every == 0);
}

StepResult DistributedTrainer::step() {
  return trainer_->step(hooks_.step);
}

perf::StepMetrics DistributedTrainer::metrics(const StepResult& r) const {
  const ddp::SyncStats& s = ddp_->last_stats();
  perf::StepMetrics m;
  m.rank = comm_->rank();
  m.step = r.step;
  m.loss = r.loss;
  const StepTimes& t = gpu_times_step_ == r.step ? gpu_times_ : r.times;
  m.data_ms = t.data;
  m.forward_ms = t.forward;
  m.backward_ms = t.backward;
  m.exposed_comm_ms = t.sync;
  m.optimizer_ms = t.optimizer;
  m.step_ms = t.total;
  m.total_comm_ms = s.total_ms;
  m.comm_bytes = s.bytes;
  m.grad_bytes = s.grad_bytes;
  m.sent_bytes = s.sent_bytes;
  m.samples = r.samples;
  m.tokens = m.samples * trainer_->tokens_per_sample();
  m.buckets = s.spans;
  if (!perf::traced_step(r.step, comm_->size()))
    for (comm::CommSpan& b : m.buckets) b.steps.clear();
  m.start_ns = r.start_ns;
  return m;
}

}  // namespace mddp::train
