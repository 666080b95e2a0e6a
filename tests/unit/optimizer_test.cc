// Optimisers against hand-written double references of PyTorch's update
// rules (torch.optim.SGD / torch.optim.Adam, defaults dampening = 0,
// nesterov = False, amsgrad = False), and bitwise determinism of model
// building and training.
#include "core/nn/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/common/check.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

using nn::Parameter;

// Several parameters of odd sizes with random values; grads are set per step.
std::vector<Parameter> make_params(Rng& rng) {
  std::vector<Parameter> ps;
  for (auto [name, shape] : {std::pair{"0.weight", Shape{3, 5}}, std::pair{"0.bias", Shape{3}},
                             std::pair{"2.weight", Shape{1, 1}}}) {
    Tensor v = random_tensor(shape, rng, -2.0f, 2.0f);
    ps.push_back({name, v, Tensor::zeros(shape)});
  }
  return ps;
}

std::vector<Parameter*> pointers(std::vector<Parameter>& ps) {
  std::vector<Parameter*> out;
  for (Parameter& p : ps) out.push_back(&p);
  return out;
}

// Float values of the state tensor called `name` in opt.state().
std::vector<float> state_of(nn::Optimizer& opt, const std::string& name) {
  for (auto& [n, t] : opt.state())
    if (n == name) return t.to_vector();
  ADD_FAILURE() << "no optimizer state named " << name;
  return {};
}

constexpr double kOptimizerRtol = 1e-5;      // float vs double over a few steps: ~1e-7 per op
constexpr double kOptimizerAtolFrac = 1e-6;  // relative to the largest element

// The parameters' values in double: where a reference rule starts.
std::vector<std::vector<double>> values_in_double(const std::vector<Parameter>& ps) {
  std::vector<std::vector<double>> out;
  for (const Parameter& p : ps) {
    const auto v = p.value.to_vector();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

// Zeros of the same sizes: a reference rule's state at the start.
std::vector<std::vector<double>> zeros_like(const std::vector<std::vector<double>>& values) {
  std::vector<std::vector<double>> out;
  for (const auto& v : values) out.emplace_back(v.size(), 0.0);
  return out;
}

// After `step`: parameter p holds the reference values...
void expect_value(int step, const Parameter& p, const std::vector<double>& ref) {
  EXPECT_TRUE(all_close(str("step ", step, " ", p.name), ref, p.value.to_vector(), kOptimizerRtol,
                        kOptimizerAtolFrac));
}

// ...and the optimiser's state tensor "<p.name>.<key>" the reference state.
void expect_state(nn::Optimizer& opt, int step, const Parameter& p, const std::string& key,
                  const std::vector<double>& ref) {
  EXPECT_TRUE(all_close(str("step ", step, " ", p.name, ".", key), ref,
                        state_of(opt, p.name + "." + key), kOptimizerRtol, kOptimizerAtolFrac));
}

// One SGD case in double, PyTorch's rule:
//   g = grad + wd p;  buf = g (first step) else momentum buf + g;  p -= lr (buf or g).
void check_sgd(float lr, float momentum, float weight_decay) {
  SCOPED_TRACE(str("lr=", lr, " momentum=", momentum, " wd=", weight_decay));
  Rng rng(900);
  std::vector<Parameter> ps = make_params(rng);
  nn::OptimizerConfig cfg;
  cfg.name = "sgd";
  cfg.lr = lr;
  cfg.momentum = momentum;
  cfg.weight_decay = weight_decay;
  auto opt = nn::make_optimizer(cfg, pointers(ps));

  auto p_ref = values_in_double(ps), buf_ref = zeros_like(p_ref);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      ps[i].grad.copy_from(random_values(ps[i].grad.numel(), rng));
      const auto g = ps[i].grad.to_vector();
      for (std::size_t j = 0; j < g.size(); ++j) {
        const double gj = g[j] + double{weight_decay} * p_ref[i][j];
        if (momentum == 0.0f) {
          p_ref[i][j] -= double{lr} * gj;
        } else {
          buf_ref[i][j] = step == 0 ? gj : double{momentum} * buf_ref[i][j] + gj;
          p_ref[i][j] -= double{lr} * buf_ref[i][j];
        }
      }
    }
    opt->step();
    EXPECT_EQ(opt->steps(), step + 1);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      expect_value(step, ps[i], p_ref[i]);
      if (momentum != 0.0f) expect_state(*opt, step, ps[i], "momentum_buffer", buf_ref[i]);
    }
  }
  if (momentum == 0.0f) {
    EXPECT_TRUE(opt->state().empty());
  }
}

// Plain SGD: p -= lr * grad, for five steps.
TEST(Sgd, PlainMatchesPyTorchRule) {
  check_sgd(0.1f, 0.0f, 0.0f);
}

// SGD with momentum: the first step sets buf = g, later steps buf = m buf + g.
TEST(Sgd, MomentumMatchesPyTorchRule) {
  check_sgd(0.05f, 0.9f, 0.0f);
}

// SGD with L2 weight decay added to the gradient, with and without momentum.
TEST(Sgd, WeightDecayMatchesPyTorchRule) {
  check_sgd(0.1f, 0.0f, 0.01f);
  check_sgd(0.05f, 0.5f, 0.1f);
}

// One Adam case in double, PyTorch's rule (step t from 1):
//   g = grad + wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
void check_adam(float lr, float weight_decay, float eps) {
  SCOPED_TRACE(str("lr=", lr, " wd=", weight_decay, " eps=", eps));
  Rng rng(901);
  std::vector<Parameter> ps = make_params(rng);
  nn::OptimizerConfig cfg;
  cfg.name = "adam";
  cfg.lr = lr;
  cfg.weight_decay = weight_decay;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.99f;
  cfg.eps = eps;
  auto opt = nn::make_optimizer(cfg, pointers(ps));
  const double b1 = cfg.beta1, b2 = cfg.beta2;

  auto p_ref = values_in_double(ps), m_ref = zeros_like(p_ref), v_ref = zeros_like(p_ref);
  for (int t = 1; t <= 6; ++t) {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      ps[i].grad.copy_from(random_values(ps[i].grad.numel(), rng, -0.5f, 0.5f));
      const auto g = ps[i].grad.to_vector();
      for (std::size_t j = 0; j < g.size(); ++j) {
        const double gj = g[j] + double{weight_decay} * p_ref[i][j];
        m_ref[i][j] = b1 * m_ref[i][j] + (1 - b1) * gj;
        v_ref[i][j] = b2 * v_ref[i][j] + (1 - b2) * gj * gj;
        const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        p_ref[i][j] -= double{lr} / bc1 * m_ref[i][j] / (std::sqrt(v_ref[i][j] / bc2) + eps);
      }
    }
    opt->step();
    EXPECT_EQ(opt->steps(), t);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      expect_value(t, ps[i], p_ref[i]);
      expect_state(*opt, t, ps[i], "exp_avg", m_ref[i]);
      expect_state(*opt, t, ps[i], "exp_avg_sq", v_ref[i]);
    }
  }
}

// Adam with bias correction (the first steps move each weight by about lr).
TEST(Adam, MatchesPyTorchRule) {
  check_adam(0.01f, 0.0f, 1e-8f);
}

// Adam with L2 weight decay folded into the gradient, and a large eps.
TEST(Adam, WeightDecayAndEpsMatchPyTorchRule) {
  check_adam(0.003f, 0.1f, 1e-3f);
}

// Bad optimiser settings are InputErrors naming the flag.
TEST(Optimizer, RejectsBadConfig) {
  nn::OptimizerConfig cfg;
  cfg.lr = 0.0f;
  EXPECT_NE(thrown_message<InputError>([&] { nn::make_optimizer(cfg, {}); }).find("--lr"),
            std::string::npos);
  cfg.lr = 0.1f;
  cfg.momentum = 1.0f;
  EXPECT_NE(thrown_message<InputError>([&] { nn::make_optimizer(cfg, {}); }).find("--momentum"),
            std::string::npos);
  cfg.momentum = 0.0f;
  cfg.name = "lbfgs";
  EXPECT_THROW(nn::make_optimizer(cfg, {}), InputError);
}

// ---- determinism -------------------------------------------------------------

std::vector<std::vector<float>> parameter_values(nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (Parameter* p : m.parameters()) out.push_back(p->value.to_vector());
  return out;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!bitwise_equal(a[i], b[i])) return false;
  return true;
}

nn::ModelConfig small_cnn(uint64_t seed) {
  nn::ModelConfig cfg;
  cfg.kind = "cnn";
  cfg.channels = {4, 8};
  cfg.hidden = 16;
  cfg.classes = 10;
  cfg.seed = seed;
  return cfg;
}

// The same seed builds bitwise identical parameters; another seed builds different ones.
TEST(Determinism, BuildModelIsAFunctionOfTheSeed) {
  for (const char* kind : {"mlp", "cnn"}) {
    SCOPED_TRACE(kind);
    nn::ModelConfig cfg = small_cnn(42);
    cfg.kind = kind;
    cfg.width = 12;
    const auto a = parameter_values(*nn::build_model(cfg, {1, 8, 8}));
    const auto b = parameter_values(*nn::build_model(cfg, {1, 8, 8}));
    EXPECT_TRUE(same_bits(a, b));
    cfg.seed = 43;
    const auto c = parameter_values(*nn::build_model(cfg, {1, 8, 8}));
    ASSERT_EQ(a.size(), c.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_FALSE(bitwise_equal(a[i], c[i])) << "parameter " << i << " ignores the seed";
  }
}

// Initial values follow PyTorch's default init: weight and bias uniform within
// +-1/sqrt(fan_in), fan_in = weight numel / out features.
TEST(Determinism, InitWithinPyTorchBounds) {
  auto model = nn::build_model(small_cnn(7), {1, 8, 8});
  const std::vector<Parameter*> params = model->parameters();
  ASSERT_EQ(params.size() % 2, 0u);
  for (std::size_t i = 0; i < params.size(); i += 2) {  // (weight, bias) per layer
    const Tensor& w = params[i]->value;
    const double bound = 1.0 / std::sqrt(static_cast<double>(w.numel() / w.dim(0)));
    for (Parameter* p : {params[i], params[i + 1]}) {
      double max_abs = 0.0;
      for (float v : p->value.to_vector()) max_abs = std::max(max_abs, double{std::abs(v)});
      EXPECT_LE(max_abs, bound) << p->name;
      EXPECT_GT(max_abs, 0.3 * bound) << p->name << " is suspiciously small";
    }
  }
}

// Losses of a few SGD-with-momentum steps on fixed random data; parameters at the end.
struct TrainRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
};

TrainRun train_a_little(uint64_t seed) {
  auto model = nn::build_model(small_cnn(seed), {1, 8, 8});
  nn::OptimizerConfig ocfg;
  ocfg.lr = 0.1f;
  ocfg.momentum = 0.9f;
  ocfg.weight_decay = 1e-4f;
  auto opt = nn::make_optimizer(ocfg, model->parameters());
  nn::CrossEntropyLoss loss;
  Rng rng(1234);
  Tensor x = random_tensor({8, 1, 8, 8}, rng), y = random_labels(8, 10, rng);
  TrainRun run;
  for (int step = 0; step < 6; ++step) {
    model->zero_grad();
    run.losses.push_back(loss.forward(model->forward(x), y));
    model->backward(loss.backward(), false);
    opt->step();
  }
  run.params = parameter_values(*model);
  return run;
}

// Two identical short training runs give bitwise identical losses and parameters,
// and training on a fixed batch lowers its loss.
TEST(Determinism, TrainingRunsAreBitwiseReproducible) {
  const TrainRun a = train_a_little(42), b = train_a_little(42);
  EXPECT_TRUE(bitwise_equal(a.losses, b.losses));
  EXPECT_TRUE(same_bits(a.params, b.params));
  EXPECT_LT(a.losses.back(), a.losses.front());
  const TrainRun c = train_a_little(43);
  EXPECT_FALSE(same_bits(a.params, c.params));
}

}  // namespace
}  // namespace mddp::test
