// `microddp demo manual`: data parallelism by hand, in one process. Two
// replicas of the small FullMLP(128, 16) start from the same seed; each
// takes half of the batch; their gradients are averaged by hand
// (core/ddp/manual_average.cc) and both take the same Adam step. The
// averaged gradient equals the whole-batch gradient (mean of means over
// equal halves), so the replicas train exactly like one model on the whole
// batch. docs/naive.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/ddp/manual_average.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "core/nn/optimizer.h"

namespace mddp::cli {
namespace {

using tensor::Tensor;

struct Replica {
  std::unique_ptr<nn::Sequential> model;
  std::unique_ptr<nn::Optimizer> opt;
  nn::CrossEntropyLoss loss;

  explicit Replica(const nn::ModelConfig& cfg, float lr)
      : model(nn::build_sequential(cfg, {cfg.width})) {
    opt = nn::make_optimizer({.name = "adam", .lr = lr}, model->parameters());
  }
  float backward_on(const Tensor& x, const Tensor& y) {
    model->zero_grad();
    const float l = loss.forward(model->forward(x), y);
    model->backward(loss.backward(), false);
    return l;
  }
};

double max_abs_diff(nn::Module& a, nn::Module& b, bool grads) {
  double m = 0;
  auto pa = a.parameters(), pb = b.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const auto va = (grads ? pa[i]->grad : pa[i]->value).to_vector();
    const auto vb = (grads ? pb[i]->grad : pb[i]->value).to_vector();
    for (std::size_t k = 0; k < va.size(); ++k)
      m = std::max(m, std::abs(static_cast<double>(va[k]) - vb[k]));
  }
  return m;
}

void run(int steps, int batch, uint64_t seed) {
  if (batch < 2 || batch % 2)
    throw InputError("--batch must be even (it is split over two replicas)");
  const nn::ModelConfig cfg{.kind = "mlp", .width = 128, .depth = 16, .classes = 2, .seed = seed};
  Replica a(cfg, 1e-3f), b(cfg, 1e-3f), whole(cfg, 1e-3f);
  std::printf("two replicas of FullMLP(128, 16): %lld parameters each, seed %llu\n",
              static_cast<long long>(a.model->num_parameters()),
              static_cast<unsigned long long>(seed));

  // One fixed batch: x ~ N(0, 1), labels 0/1.
  Rng rng(seed + 1);
  std::vector<float> xs(batch * 128), ys(batch);
  for (float& v : xs) v = rng.normal();
  for (float& v : ys) v = static_cast<float>(rng.below(2));
  const Tensor x = Tensor::from_vector({batch, 128}, xs), y = Tensor::from_vector({batch}, ys);
  const int h = batch / 2;
  const Tensor x0 = x.view(0, {h, 128}), x1 = x.view(h * 128, {h, 128});
  const Tensor y0 = y.view(0, {h}), y1 = y.view(h, {h});

  for (int s = 1; s <= steps; ++s) {
    const float l0 = a.backward_on(x0, y0), l1 = b.backward_on(x1, y1);
    const float lw = whole.backward_on(x, y);
    // The all-reduce, by hand: g = (g_a + g_b) / 2 into both replicas.
    ddp::average_replica_gradients({a.model.get(), b.model.get()});
    if (s == 1)
      std::printf(
          "step 1: max |averaged grad - whole-batch grad| = %.3g (the two are the same gradient)\n",
          max_abs_diff(*a.model, *whole.model, true));
    a.opt->step();
    b.opt->step();
    whole.opt->step();
    if (s % 5 == 0 || s == 1)
      std::printf("step %02d | mean loss of the replicas %.6f | whole-batch loss %.6f\n", s,
                  (l0 + l1) / 2, lw);
  }
  const double ab = max_abs_diff(*a.model, *b.model, false),
               aw = max_abs_diff(*a.model, *whole.model, false);
  std::printf(
      "after %d steps: max |replica A - replica B| = %.3g, max |replica A - whole-batch model| = "
      "%.3g\n",
      steps, ab, aw);
  std::printf(
      "%s\n",
      ab == 0 && aw < 1e-4
          ? "OK: two half-batch replicas with averaged gradients = one model on the whole batch"
          : "WRONG: the replicas diverged");
  if (ab != 0 || aw >= 1e-4) throw Error("demo manual: replicas diverged");
}

}  // namespace

void register_demo_manual(CLI::App& demo) {
  struct Opts {
    int steps = 20, batch = 32;
    uint64_t seed = 42;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      demo.add_subcommand("manual", "Two replicas in one process, gradients averaged by hand");
  cmd->add_option("--steps", o->steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", o->batch, "whole batch (split in two)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of both replicas")->capture_default_str();
  cmd->callback([o] { run(o->steps, o->batch, o->seed); });
}

}  // namespace mddp::cli
