#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/data/seeds.h"
#include "core/tensor/ops.h"
#include "core/train/checkpoint_meta.h"

namespace mddp::train {
namespace {

tensor::Shape batch_shape(int64_t n, const tensor::Shape& sample) {
  tensor::Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

// [n] class indices, [n, tokens] for text, or [n, target_dim] for regression.
tensor::Shape target_shape(int64_t n, const data::Dataset& d) {
  if (d.targets_per_sample() > 1) return {n, d.targets_per_sample()};
  return d.target_dim() == 0 ? tensor::Shape{n} : tensor::Shape{n, d.target_dim()};
}

// The model's data: a GPT takes token sequences and gets its vocabulary
// from them; the other models take one target per sample.
void fit_model_to_data(nn::ModelConfig& model, const data::Dataset& d) {
  if (model.kind == "gpt") {
    if (d.targets_per_sample() != d.sample_shape().back() || d.num_classes() < 1)
      throw InputError(str("--model gpt trains on token sequences, and ", d.name(),
                           " is not one: use --dataset synthetic-tokens or text:PATH"));
    model.vocab = d.num_classes();
    return;
  }
  if (d.targets_per_sample() != 1)
    throw InputError(str(d.name(), " holds token sequences: train it with --model gpt"));
  if (d.num_classes() > 0 && model.classes != d.num_classes())
    throw InputError(
        str("--classes ", model.classes, " but ", d.name(), " has ", d.num_classes(), " classes"));
}

// Before backward, so a DDP job stops in the step where it happened: this
// rank's error becomes the coordinator's verdict, and the other ranks, held
// in the step's all-reduce, are aborted with it (docs/failures.md).
[[noreturn]] void throw_nonfinite_loss(int64_t step, float loss) {
  throw Error(str("the training loss is ", loss, " at step ", step,
                  ": training diverged (lower --lr, or pass --allow-nonfinite-loss to train on)"));
}

}  // namespace

uint64_t dropout_seed(uint64_t seed, int rank, int64_t step, int64_t micro_batch) {
  constexpr uint64_t kDropoutStream = 0x64726f706f757421ULL;  // "dropout!"
  const uint64_t per_rank = data::derive_seed(seed, kDropoutStream + static_cast<uint64_t>(rank));
  return data::derive_seed(data::derive_seed(per_rank, static_cast<uint64_t>(step)),
                           static_cast<uint64_t>(micro_batch));
}

Trainer::Trainer(TrainConfig cfg, int rank, int world_size)
    : cfg_(std::move(cfg)), rank_(rank), world_size_(world_size) {
  cfg_.validate();
  straggler_ = parse_straggler(cfg_.dist.straggler);
  if (straggler_.rank >= world_size_)
    throw InputError(str("--straggler ", cfg_.dist.straggler, ": rank ", straggler_.rank,
                         " does not exist in a job of ", world_size_, " rank(s)"));
  lab_fault_ = LabFault::from_environment();
  tensor::set_num_threads(cfg_.threads);
  precision_ = tensor::parse_precision(cfg_.precision);
  scaler_ = LossScaler(precision_ == tensor::Precision::kFp16, cfg_.loss_scale);
  const tensor::Device device = tensor::Device::parse(cfg_.device);
  tensor::require_available(device);

  // Before the data: a model that cannot fit is refused at once (synthetic
  // inputs have `width` features; other datasets at least 1).
  nn::require_model_fits(cfg_.model,
                         cfg_.data.spec.starts_with("synthetic") ? cfg_.model.width : 1);
  // Synthetic data is shaped by the model: inputs of `width` features and,
  // for regression, targets as wide as the model's output.
  cfg_.data.seed = cfg_.seed;
  cfg_.data.input_dim = cfg_.model.width;
  cfg_.data.classes = cfg_.model.classes;
  cfg_.data.target_dim = cfg_.model.classes > 0 ? cfg_.model.classes : cfg_.model.width;
  cfg_.data.block = cfg_.model.block;  // text: samples of --block tokens
  train_set_ = data::make_dataset(cfg_.data, data::Split::kTrain);
  if (cfg_.eval) test_set_ = data::make_dataset(cfg_.data, data::Split::kTest);
  fit_model_to_data(cfg_.model, *train_set_);

  cfg_.model.seed = cfg_.seed;
  model_ = nn::build_model(cfg_.model, train_set_->sample_shape(), device);
  loss_ = nn::make_loss(cfg_.loss);
  optimizer_ = nn::make_optimizer(cfg_.optim, model_->parameters());
  shard_data();
  if (!cfg_.init_from.empty()) load_weights(cfg_.init_from);
  if (auto from = resume_point(cfg_, world_size_)) restore(*from);
}

void Trainer::shard_data() {
  sampler_ = std::make_unique<data::GlobalBatchSampler>(
      train_set_->size(), cfg_.batch * cfg_.accumulate, rank_, world_size_, cfg_.seed,
      /*shuffle=*/true, cfg_.last_batch == "keep");
  // The largest micro-batch a rank runs: its share of a full step, split K ways.
  const int64_t rows = (sampler_->max_local_batch() + cfg_.accumulate - 1) / cfg_.accumulate;
  const tensor::Device device = tensor::Device::parse(cfg_.device);
  x_ = tensor::Tensor::empty(batch_shape(rows, train_set_->sample_shape()), device);
  y_ = tensor::Tensor::empty(target_shape(rows, *train_set_), device);
}

void Trainer::set_world(int rank, int world_size, const TrainConfig& cfg) {
  MDDP_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "rank ", rank, " of ", world_size);
  rank_ = rank;
  world_size_ = world_size;
  cfg_.run_dir = cfg.run_dir;
  cfg_.checkpoint_every = cfg.checkpoint_every;
  shard_data();
}

const tensor::Tensor& Trainer::scaled_loss_grad(float weight) {
  const tensor::Tensor& g = loss_->backward();
  if (!scaler_.enabled() && weight == 1.0f) return g;
  tensor::ensure_shape(scaled_dloss_, g.shape(), g.device());
  tensor::copy(g, scaled_dloss_);
  tensor::scale(scaled_dloss_, weight * (scaler_.enabled() ? scaler_.scale() : 1.0f));
  return scaled_dloss_;
}

// Note [Uneven shares]
// ~~~~~~~~~~~~~~~~~~~~
// A step's R samples are shared out over the W ranks and, within a rank, over
// its K micro-batches, as evenly as they go (data::even_share): when W·K does
// not divide R the pieces differ by one sample, and at a kept last step with
// R < W·K some are empty. A piece's loss is the mean over its own n samples;
// DDP averages the ranks' gradients (÷W) and the step averages micro-batches
// (÷K). So each piece's loss gradient is scaled by its weight w = W·K·n / R:
// the result is then Σ n·mean / R, the mean gradient over the whole batch,
// which is what one process computes on it. When W·K divides R every weight
// is exactly 1 and nothing is scaled: even splits train bitwise as before.
// An empty piece (w = 0) runs forward and backward on one stand-in sample of
// the step with its gradient scaled to zero, so its rank's hooks and
// collectives run exactly as on every other rank and no peer waits for it
// (PyTorch DDP's join() for uneven inputs, within one step). Its loss is not
// counted; a rank whose whole share is empty reports the stand-in's loss.
Trainer::MicroBatch Trainer::micro_batch(int64_t epoch, int64_t step_in_epoch,
                                         std::span<const int64_t> mine, int64_t m) {
  const int64_t k = cfg_.accumulate, total = sampler_->batch_at(step_in_epoch);
  const data::Share piece = data::even_share(static_cast<int64_t>(mine.size()), k, m);
  MicroBatch mb;
  mb.samples = piece.size();
  mb.indices = mb.samples > 0 ? mine.subspan(static_cast<std::size_t>(piece.begin),
                                             static_cast<std::size_t>(mb.samples))
                              : sampler_->stand_in(epoch, step_in_epoch);
  const int64_t share = world_size_ * k * mb.samples;
  mb.weight = share == total ? 1.0f : static_cast<float>(static_cast<double>(share) / total);
  return mb;
}

void Trainer::load_batch(const MicroBatch& mb, int64_t step) {
  const auto rows = static_cast<int64_t>(mb.indices.size());  // fewer than x_'s: a view
  x_batch_ = rows == x_.dim(0) ? x_ : x_.view(0, batch_shape(rows, train_set_->sample_shape()));
  y_batch_ = rows == y_.dim(0) ? y_ : y_.view(0, target_shape(rows, *train_set_));
  train_set_->get_batch(mb.indices, x_batch_, y_batch_);
  lab_fault_.poison(rank_, step, y_batch_);
}

int64_t Trainer::tokens_per_sample() const {
  return cfg_.model.kind == "gpt" ? train_set_->targets_per_sample() : 0;
}

nn::LrSchedule Trainer::lr_schedule() const {
  return {cfg_.optim.lr, cfg_.lr_min, cfg_.warmup_steps, total_steps()};
}

int64_t Trainer::total_steps() const {
  return cfg_.steps > 0 ? cfg_.steps : cfg_.epochs * steps_per_epoch();
}

StepResult Trainer::step(const StepHooks& hooks) {
  StepResult r;
  r.epoch = steps_done_ / steps_per_epoch();
  r.step = steps_done_ + 1;
  const int64_t k_micro = cfg_.accumulate;
  // This rank's slice of the step's global batch, run as `accumulate`
  // micro-batches (Note [Global batch] in core/data/sampler.h).
  const int64_t in_epoch = steps_done_ % steps_per_epoch();
  const auto mine = sampler_->indices(r.epoch, in_epoch);
  r.batch = sampler_->batch_at(in_epoch);
  // Each phase's hook (and --straggler's sleep) runs inside that phase's
  // timed span, so an injected delay shows up where it was put.
  const auto phase = [&](const char* name) {
    if (hooks.on_phase) hooks.on_phase(r.step, name);
    if (straggler_.rank == rank_ && straggler_.phase == name)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(straggler_.ms));
    lab_fault_.at_phase(rank_, r.step, name);
  };
  const int64_t t_begin = now_ns();
  const tensor::PrecisionScope autocast(precision_);
  model_->zero_grad();
  double loss_sum = 0, stand_in_loss = 0;  // loss_sum: over this rank's samples
  for (int64_t m = 0; m < k_micro; ++m) {
    const int64_t t0 = now_ns();
    phase("data");
    const MicroBatch mb = micro_batch(r.epoch, in_epoch, mine, m);
    load_batch(mb, r.step);
    const int64_t t1 = now_ns();
    phase("forward");
    model_->set_dropout(true, dropout_seed(cfg_.seed, rank_, r.step, m));
    const tensor::Tensor& out = model_->forward(x_batch_);
    const float loss = loss_->forward(out, y_batch_);
    if (!std::isfinite(loss) && !cfg_.allow_nonfinite_loss) throw_nonfinite_loss(r.step, loss);
    loss_sum += static_cast<double>(loss) * static_cast<double>(mb.samples);
    if (mb.samples == 0) stand_in_loss = loss;
    r.samples += mb.samples;
    const int64_t t2 = now_ns();
    const bool last = m + 1 == k_micro;
    phase("backward");
    if (hooks.before_backward) hooks.before_backward(last);
    model_->backward(scaled_loss_grad(mb.weight), /*need_dx=*/false);
    const int64_t t3 = now_ns();
    if (last) phase("sync");
    if (last && hooks.after_backward) hooks.after_backward();
    const int64_t t4 = now_ns();
    r.times.data += ns_to_ms(t1 - t0);
    r.times.forward += ns_to_ms(t2 - t1);
    r.times.backward += ns_to_ms(t3 - t2);
    r.times.sync += ns_to_ms(t4 - t3);
  }
  phase("optimizer");
  const int64_t t5 = now_ns();
  // The sum of K micro-batch means -> the mean over all K*b samples, and the
  // loss scale taken out; false: fp16 gradients overflowed, skip the step.
  // Then the schedule's rate, and clipping of the (averaged) gradient.
  r.lr = nn::lr_at(lr_schedule(), r.step);
  if (scaler_.unscale(model_->parameters(), 1.0f / static_cast<float>(k_micro))) {
    optimizer_->set_lr(r.lr);
    if (cfg_.optim.grad_clip > 0.0f) r.grad_norm = optimizer_->clip_grad_norm(cfg_.optim.grad_clip);
    optimizer_->step();
  }
  ++steps_done_;
  if (hooks.after_optimizer) hooks.after_optimizer(steps_done_);
  lab_fault_.corrupt(rank_, steps_done_, *model_);
  const int64_t t6 = now_ns();
  r.times.optimizer = ns_to_ms(t6 - t5);
  r.times.total = ns_to_ms(t6 - t_begin);
  r.start_ns = t_begin;
  r.loss = r.samples > 0 ? static_cast<float>(loss_sum / static_cast<double>(r.samples))
                         : static_cast<float>(stand_in_loss);
  return r;
}

EvalResult Trainer::evaluate() {
  EvalResult r;
  if (!test_set_) return r;
  const int64_t tokens = test_set_->targets_per_sample();  // per sample: 1, or a text's block
  const int64_t chunk = std::max<int64_t>(1, 1000 / tokens);
  const tensor::Device device = x_.device();
  const tensor::PrecisionScope autocast(precision_);  // the model as it trains
  model_->set_dropout(false, 0);                      // but without dropout
  tensor::Tensor x = tensor::Tensor::empty(batch_shape(chunk, test_set_->sample_shape()), device);
  tensor::Tensor y = tensor::Tensor::empty(target_shape(chunk, *test_set_), device);
  auto eval_loss = nn::make_loss(cfg_.loss);
  std::vector<int64_t> idx(chunk);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < test_set_->size(); begin += chunk) {
    const int64_t n = std::min(chunk, test_set_->size() - begin);
    if (n != x.dim(0)) {  // the last, shorter chunk: views of the same buffers
      x = x.view(0, batch_shape(n, test_set_->sample_shape()));
      y = y.view(0, target_shape(n, *test_set_));
    }
    idx.resize(n);
    std::iota(idx.begin(), idx.end(), begin);
    test_set_->get_batch(idx, x, y);
    const tensor::Tensor& out = model_->forward(x);
    loss_sum += static_cast<double>(eval_loss->forward(out, y)) * n;
    if (test_set_->num_classes() > 0) correct += tensor::count_correct(out, y);
  }
  r.samples = test_set_->size();
  r.loss = loss_sum / static_cast<double>(r.samples);
  if (test_set_->num_classes() > 0)  // of tokens, for text
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.samples * tokens);
  return r;
}

}  // namespace mddp::train
