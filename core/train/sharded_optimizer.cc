#include "core/train/sharded_optimizer.h"

#include <algorithm>
#include <map>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::train {
namespace {

bool is_adam(const nn::OptimizerConfig& cfg) {  // Adam's moments and step count: adam or adamw
  return cfg.name == "adam" || cfg.name == "adamw";
}

// The state tensors nn::make_optimizer's optimiser keeps per parameter.
std::vector<std::string> state_kinds(const nn::OptimizerConfig& cfg) {
  if (is_adam(cfg)) return {"exp_avg", "exp_avg_sq"};
  if (cfg.momentum != 0.0f) return {"momentum_buffer"};
  return {};
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(const nn::OptimizerConfig& cfg,
                                   std::vector<nn::Parameter*> params, ddp::ShardedSync& sync,
                                   comm::ProcessGroup& comm, nn::Optimizer& full)
    : nn::Optimizer(params, full.lr()),
      cfg_(cfg),
      sync_(sync),
      comm_(comm),
      kinds_(state_kinds(cfg)) {
  const auto& buckets = sync_.sharded_buckets();
  std::map<const nn::Parameter*, std::pair<std::size_t, int64_t>> where;
  for (std::size_t b = 0; b < buckets.size(); ++b)
    for (const auto& [p, offset] : buckets[b].params) where[p] = {b, offset};
  for (nn::Parameter* p : params) {
    const auto it = where.find(p);
    MDDP_CHECK(it != where.end(), "parameter ", p->name, " is in no sharded bucket");
    places_.push_back({p, it->second.first, it->second.second});
  }

  // This rank's shard of `full`'s state: the part of each parameter's
  // tensor that falls inside [shard_begin, shard_begin + shard_numel).
  std::map<std::string, tensor::Tensor> from;
  for (auto& [name, t] : full.state()) from[name] = t;
  for (const ddp::ShardedBucket& s : buckets) {
    auto& kinds = shard_.emplace_back();
    for (std::size_t k = 0; k < kinds_.size(); ++k)
      kinds.push_back(tensor::Tensor::zeros({s.shard_numel}, s.values.device()));
  }
  for (const Place& pl : places_) {
    const ddp::ShardedBucket& s = buckets[pl.bucket];
    const int64_t lo = std::max(pl.offset, s.shard_begin);
    const int64_t hi = std::min(pl.offset + pl.param->value.numel(), s.shard_begin + s.shard_numel);
    if (lo >= hi) continue;
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      const tensor::Tensor& t = from.at(pl.param->name + "." + kinds_[k]);
      tensor::Tensor dst = shard_[pl.bucket][k].view(lo - s.shard_begin, {hi - lo});
      tensor::copy(t.view(lo - pl.offset, {hi - lo}), dst);
    }
  }
  steps_ = full.steps();
}

void ShardedOptimizer::step() {
  if (is_adam(cfg_))
    ++steps_;  // Adam counts the step it takes (bias correction), as nn::Optimizer's does
  const auto& buckets = sync_.sharded_buckets();
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const ddp::ShardedBucket& s = buckets[b];
    tensor::Tensor value = s.values.view(s.shard_begin, {s.shard_numel});
    const tensor::Tensor grad = s.grads.view(s.shard_begin, {s.shard_numel});
    std::vector<tensor::Tensor>& st = shard_[b];
    if (cfg_.name == "adamw") {
      adamw_shard(b);
    } else if (is_adam(cfg_)) {
      tensor::adam_update(value, grad, st[0], st[1], lr_, cfg_.beta1, cfg_.beta2, cfg_.eps,
                          cfg_.weight_decay, steps_);
    } else {
      tensor::Tensor none;
      tensor::sgd_update(value, grad, st.empty() ? none : st[0], lr_, cfg_.momentum,
                         cfg_.weight_decay, steps_ == 0);
    }
    sync_.gather(b);  // this bucket's all-gather runs while the next shard is updated
  }
  sync_.finish_gather();
  if (!is_adam(cfg_)) ++steps_;
}

void ShardedOptimizer::adamw_shard(std::size_t b) {
  const ddp::ShardedBucket& s = sync_.sharded_buckets()[b];
  const int64_t end = s.shard_begin + s.shard_numel;
  for (const auto& [p, offset] : s.params) {
    const int64_t lo = std::max(offset, s.shard_begin);
    const int64_t hi = std::min(offset + p->value.numel(), end);
    if (lo >= hi) continue;  // padding, or a parameter outside this shard
    tensor::Tensor value = s.values.view(lo, {hi - lo});
    tensor::Tensor m = shard_[b][0].view(lo - s.shard_begin, {hi - lo});
    tensor::Tensor v = shard_[b][1].view(lo - s.shard_begin, {hi - lo});
    tensor::adamw_update(value, s.grads.view(lo, {hi - lo}), m, v, lr_, cfg_.beta1, cfg_.beta2,
                         cfg_.eps, nn::decays(*p) ? cfg_.weight_decay : 0.0f, steps_);
  }
}

float ShardedOptimizer::grad_squares() {
  const auto& buckets = sync_.sharded_buckets();
  tensor::ensure_shape(squares_, {1}, buckets.front().grads.device());
  tensor::fill(squares_, 0.0f);
  for (const ddp::ShardedBucket& s : buckets)
    tensor::sum_squares(s.grads.view(s.shard_begin, {s.shard_numel}), squares_);
  comm_.all_reduce(squares_.data(), 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();
  return squares_.to_vector()[0];
}

void ShardedOptimizer::scale_grads(float factor) {
  for (const ddp::ShardedBucket& s : sync_.sharded_buckets()) {
    tensor::Tensor shard = s.grads.view(s.shard_begin, {s.shard_numel});
    tensor::scale(shard, factor);
  }
}

void ShardedOptimizer::gather_state() {
  const auto& buckets = sync_.sharded_buckets();
  whole_.resize(buckets.size());
  std::vector<comm::WorkPtr> works;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const ddp::ShardedBucket& s = buckets[b];
    whole_[b].resize(kinds_.size());
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      tensor::Tensor& whole = whole_[b][k];
      if (!whole.defined()) whole = tensor::Tensor::zeros({s.values.numel()}, s.values.device());
      tensor::Tensor mine = whole.view(s.shard_begin, {s.shard_numel});
      tensor::copy(shard_[b][k], mine);
      works.push_back(
          comm_.all_gather(mine.data(), whole.data(), s.shard_numel, comm::DataType::kFloat32));
    }
  }
  for (auto& w : works) w->wait();
  gathered_at_ = steps_;
}

int64_t ShardedOptimizer::state_numel() const {
  int64_t n = 0;
  for (const auto& kinds : shard_)
    for (const tensor::Tensor& t : kinds) n += t.numel();
  return n;
}

std::vector<std::pair<std::string, tensor::Tensor>> ShardedOptimizer::state() {
  MDDP_CHECK(kinds_.empty() || gathered_at_ == steps_,
             "the sharded optimiser's state was read without gather_state() on every rank since "
             "its last step");
  std::vector<std::pair<std::string, tensor::Tensor>> out;
  for (const Place& pl : places_)
    for (std::size_t k = 0; k < kinds_.size(); ++k)
      out.emplace_back(pl.param->name + "." + kinds_[k],
                       whole_[pl.bucket][k].view(pl.offset, pl.param->value.shape()));
  return out;
}

}  // namespace mddp::train
