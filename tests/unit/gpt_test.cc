// The GPT (core/nn/gpt.h) and its layers: every gradient against central
// finite differences, the grad-ready hooks of the tied weight
// (Note [Tied weight]), GPT-2's initialisation and names, causality, dropout's
// reproducibility; AdamW's decay rule, gradient clipping and the learning
// rate schedule.
//
// The finite differences follow nn_gradcheck_test.cc: the loss is
// recomputed in double from the module's float output (sum y*r, or the
// cross-entropy), each element moved by +-4e-3, and
//   |analytic - numeric| <= 2e-3 |numeric| + 2e-4 G,
// G the largest |numeric| over the module. These layers are smooth (no
// kinks), so no step needs retrying; but LayerNorm over 8 features curves
// enough that nn_gradcheck's step of 1e-2 puts a truncation error of 0.5%
// on a few position-embedding elements (measured), hence the smaller step.
#include "core/nn/gpt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/common/check.h"
#include "core/nn/attention.h"
#include "core/nn/loss.h"
#include "core/nn/lr_schedule.h"
#include "core/nn/optimizer.h"
#include "core/nn/transformer_layers.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

using nn::Module;
using nn::Parameter;

constexpr float kGptEps = 4e-3f;
constexpr double kGptRtol = 2e-3, kGptAtolFrac = 2e-4;

// Checks backward's gradients of every parameter of m, and of x when given,
// against central differences of `loss` (a double function of m's output);
// `dloss` is the gradient backward starts from.
void check_module(Module& m, Tensor& x, bool check_x,
                  const std::function<double(const Tensor&)>& loss,
                  const std::function<const Tensor&(const Tensor&)>& dloss) {
  SCOPED_TRACE(m.describe());
  m.zero_grad();
  const Tensor& y = m.forward(x);
  const Tensor& dy = dloss(y);
  const std::vector<float> dx = check_x ? m.backward(dy, true).to_vector() : std::vector<float>{};
  if (!check_x) m.backward(dy, false);
  std::vector<std::vector<float>> grads;
  for (Parameter* p : m.parameters()) grads.push_back(p->grad.to_vector());
  const auto f = [&] { return loss(m.forward(x)); };
  std::vector<std::vector<double>> numeric;
  if (check_x) numeric.push_back(numeric_grad(x, f, kGptEps));
  for (Parameter* p : m.parameters()) numeric.push_back(numeric_grad(p->value, f, kGptEps));
  double scale = 0;
  for (const auto& g : numeric)
    for (double v : g) scale = std::max(scale, std::abs(v));
  std::size_t i = 0;
  if (check_x) {
    EXPECT_TRUE(all_close("dx", numeric[i++], dx, kGptRtol, kGptAtolFrac, false, scale));
  }
  for (Parameter* p : m.parameters()) {
    EXPECT_TRUE(all_close("d" + p->name, numeric[i], grads[i - (check_x ? 1 : 0)], kGptRtol,
                          kGptAtolFrac, true, scale));
    ++i;
  }
}

// The loss sum(y * r): backward starts from r.
void check_with_dot(Module& m, Tensor& x, uint64_t seed) {
  Rng rng(seed);
  Tensor r;
  check_module(
      m, x, true, [&](const Tensor& y) { return dot_ref(y.to_vector(), r.to_vector()); },
      [&](const Tensor& y) -> const Tensor& {
        r = random_tensor(y.shape(), rng);
        return r;
      });
}

nn::GptConfig tiny_gpt(float dropout = 0.0f) {
  return {.vocab = 7, .block = 6, .layers = 2, .heads = 2, .embd = 8, .dropout = dropout};
}

Tensor token_ids(int64_t b, int64_t t, int64_t vocab, Rng& rng) {
  return random_labels(b * t, vocab, rng).reshape({b, t});
}

// ---- layers -------------------------------------------------------------------

TEST(GptGradCheck, LayerNormGeluAttentionMlpBlock) {
  Rng rng(10);
  nn::LayerNorm ln(6);
  for (Parameter* p : ln.parameters()) p->value.copy_from(random_values(6, rng));  // not 1 and 0
  Tensor x = random_tensor({2, 3, 6}, rng);
  check_with_dot(ln, x, 11);
  nn::Gelu gelu;
  Tensor xg = random_tensor({4, 5}, rng, -3, 3);
  check_with_dot(gelu, xg, 12);
  nn::CausalSelfAttention attn(8, 2, 0.0f, 0.3f, 0.3f, rng);
  Tensor xa = random_tensor({2, 5, 8}, rng);
  check_with_dot(attn, xa, 13);
  nn::Mlp mlp(4, 0.0f, 0.3f, 0.3f, rng);
  Tensor xm = random_tensor({2, 3, 4}, rng);
  check_with_dot(mlp, xm, 14);
  nn::GptConfig cfg = tiny_gpt();
  nn::Block block(cfg, rng);
  Tensor xb = random_tensor({2, 4, 8}, rng);
  check_with_dot(block, xb, 15);
}

// The whole model through the cross-entropy: every parameter, the tied
// weight's two contributions included; and with dropout on, whose masks are
// fixed by the seed, so the function is as smooth.
// Four layers: blocks 0 to 2 run their backward in block 3's buffers, each
// writing its output gradient over its input's (Note [Shared backward buffers]).
TEST(GptGradCheck, WholeModelThroughCrossEntropy) {
  for (auto [dropout, layers] : {std::pair{0.0f, 2}, {0.2f, 2}, {0.0f, 4}}) {
    SCOPED_TRACE(str("dropout ", dropout, ", ", layers, " layers"));
    Rng rng(20);
    nn::GptConfig cfg = tiny_gpt(dropout);
    cfg.layers = layers;
    nn::Gpt gpt(cfg, rng);
    for (Parameter* p : gpt.parameters())  // larger weights: gradients well above the noise
      if (p->value.ndim() == 2)
        p->value.copy_from(random_values(p->value.numel(), rng, -0.5f, 0.5f));
    gpt.set_dropout(true, 77);
    Tensor ids = token_ids(2, 5, 7, rng), labels = random_labels(10, 7, rng);
    nn::CrossEntropyLoss xent;
    check_module(
        gpt, ids, false,
        [&](const Tensor& y) { return xent_ref(y.to_vector(), labels.to_vector(), 10, 7); },
        [&](const Tensor& y) -> const Tensor& {
          xent.forward(y, labels);
          return xent.backward();
        });
  }
}

// Note [Shared backward buffers]: a block given another's buffers computes
// exactly what one with its own does, in the other's storage; modules of
// different kinds cannot share.
TEST(GptBackwardBuffers, ABlockRunsItsBackwardInAnothersBuffers) {
  const nn::GptConfig cfg = tiny_gpt(0.2f);
  Rng ra(30), rb(31), rc(31), rng(32);
  nn::Block donor(cfg, ra), shared(cfg, rb), own(cfg, rc);  // shared and own: the same weights
  const Tensor x = random_tensor({2, 4, 8}, rng), dy = random_tensor({2, 4, 8}, rng);
  for (Module* m : std::initializer_list<Module*>{&donor, &shared, &own}) m->set_dropout(true, 9);
  donor.forward(x);
  donor.backward(dy, true);
  nn::share_backward_buffers(shared, donor);
  for (Module* m : std::initializer_list<Module*>{&shared, &own}) {
    m->zero_grad();
    m->forward(x);
  }
  EXPECT_EQ(shared.backward(dy, true).to_vector(), own.backward(dy, true).to_vector());
  const auto ps = shared.parameters(), po = own.parameters();
  for (std::size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(ps[i]->grad.to_vector(), po[i]->grad.to_vector()) << ps[i]->name;
  std::vector<Tensor*> theirs, mine;
  donor.collect_backward_buffers(theirs);
  shared.collect_backward_buffers(mine);
  ASSERT_EQ(mine.size(), theirs.size());
  // The block's 2, the LayerNorms' 2, attention's 4 and its 4 children's, the MLP's 4 children's.
  ASSERT_EQ(mine.size(), 16u);
  for (std::size_t i = 0; i < mine.size(); ++i)
    EXPECT_TRUE(mine[i]->shares_storage(*theirs[i])) << "buffer " << i;
  nn::Linear linear(8, 8, rng);
  EXPECT_THROW(nn::share_backward_buffers(linear, donor), std::exception);
}

// ---- hooks: Note [Tied weight] --------------------------------------------------

// The tied token table fires twice (uses = 2): first of all, with the
// head's share alone, and last of all, with its final gradient. Every other
// parameter fires once; the last firings are in the reverse of
// parameters(), each holding the parameter's final gradient.
TEST(GptHooks, TheTiedWeightFiresFirstWithTheHeadsShareAndLastWithItsWhole) {
  Rng rng(30);
  nn::Gpt gpt(tiny_gpt(), rng);
  struct Event {
    Parameter* p;
    std::vector<float> grad;
  };
  std::vector<Event> events;
  gpt.set_grad_ready_hook([&](Parameter& p) { events.push_back({&p, p.grad.to_vector()}); });
  Tensor ids = token_ids(3, 6, 7, rng), labels = random_labels(18, 7, rng);
  nn::CrossEntropyLoss xent;
  for (int round = 0; round < 2; ++round) {  // and again: every backward fires every hook
    events.clear();
    gpt.zero_grad();
    xent.forward(gpt.forward(ids), labels);
    gpt.backward(xent.backward(), false);
    const auto params = gpt.parameters();
    Parameter* tied = params.front();
    ASSERT_EQ(tied->name, "transformer.wte.weight");
    EXPECT_EQ(tied->uses, 2);
    for (std::size_t i = 1; i < params.size(); ++i) EXPECT_EQ(params[i]->uses, 1) << i;
    ASSERT_EQ(events.size(), params.size() + 1);
    EXPECT_EQ(events.front().p, tied) << "the head's contribution is backward's first";
    EXPECT_FALSE(bitwise_equal(events.front().grad, tied->grad.to_vector()))
        << "the head's share alone is not the whole gradient";
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Event& e = events[i + 1];
      EXPECT_EQ(e.p, params[params.size() - 1 - i]) << "event " << i + 1;
      EXPECT_TRUE(bitwise_equal(e.grad, e.p->grad.to_vector()))
          << e.p->name << " changed after its last hook fired";
    }
  }
}

// ---- the model ---------------------------------------------------------------------

// nanoGPT's names and shapes; GPT-2's initialisation; bitwise a function of the seed.
TEST(Gpt, NamesInitialisationAndDeterminism) {
  nn::GptConfig cfg = tiny_gpt();
  cfg.vocab = 50, cfg.embd = 32, cfg.layers = 3;
  Rng a(5), b(5), c(6);
  nn::Gpt gpt(cfg, a), same(cfg, b), other(cfg, c);
  const auto params = gpt.parameters();
  ASSERT_EQ(params.size(), 2 + 12 * 3 + 2u);
  EXPECT_EQ(params[1]->name, "transformer.wpe.weight");
  EXPECT_EQ(params[2]->name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(params[4]->name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(params[4]->value.shape(), (tensor::Shape{96, 32}));
  EXPECT_EQ(params[13]->name, "transformer.h.0.mlp.c_proj.bias");
  EXPECT_EQ(params.back()->name, "transformer.ln_f.bias");
  const auto std_of = [](const Parameter& p) {
    double s = 0;
    for (float v : p.value.to_vector()) s += static_cast<double>(v) * v;
    return std::sqrt(s / static_cast<double>(p.value.numel()));
  };
  bool differs = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    EXPECT_TRUE(bitwise_equal(p.value.to_vector(), same.parameters()[i]->value.to_vector()));
    differs |= !bitwise_equal(p.value.to_vector(), other.parameters()[i]->value.to_vector());
    const bool proj = p.name.ends_with("c_proj.weight");
    if (p.value.ndim() == 2) {
      const double want = proj ? 0.02 / std::sqrt(6.0) : 0.02;  // 1 / sqrt(2 * layers)
      EXPECT_NEAR(std_of(p), want, 0.15 * want) << p.name;
    } else {
      const float want = p.name.find("ln_") != std::string::npos && p.name.ends_with("weight")
                             ? 1.0f
                             : 0.0f;  // LayerNorm weights 1; biases 0
      EXPECT_EQ(p.value.to_vector(), std::vector<float>(p.value.numel(), want)) << p.name;
    }
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(gpt.spec().type, "GPT");
}

// A token changes the logits of its own position and later ones, never earlier ones.
TEST(Gpt, IsCausal) {
  Rng rng(40);
  nn::Gpt gpt(tiny_gpt(), rng);
  Tensor ids = token_ids(1, 6, 7, rng);
  const auto before = gpt.forward(ids).to_vector();
  std::vector<float> changed = ids.to_vector();
  changed[3] = std::fmod(changed[3] + 1.0f, 7.0f);
  const auto after = gpt.forward(Tensor::from_vector({1, 6}, changed)).to_vector();
  for (int64_t t = 0; t < 6; ++t) {
    const std::vector<float> b(before.begin() + t * 7, before.begin() + (t + 1) * 7);
    const std::vector<float> a(after.begin() + t * 7, after.begin() + (t + 1) * 7);
    if (t < 3)
      EXPECT_TRUE(bitwise_equal(a, b)) << "position " << t << " saw a later token";
    else
      EXPECT_FALSE(bitwise_equal(a, b)) << "position " << t << " did not see token 3";
  }
  EXPECT_THROW(gpt.forward(Tensor::zeros({1, 7})), std::logic_error);  // longer than the block
}

// Dropout's masks are a function of the seed set_dropout gives; evaluation turns it off.
TEST(Gpt, DropoutIsReproducibleFromItsSeedAndOffInEvaluation) {
  Rng rng(50), rng_plain(50);
  nn::Gpt gpt(tiny_gpt(0.3f), rng), plain(tiny_gpt(0.0f), rng_plain);
  Rng data(51);
  Tensor ids = token_ids(2, 6, 7, data);
  gpt.set_dropout(true, 1);
  const auto first = gpt.forward(ids).to_vector();
  gpt.set_dropout(true, 2);
  const auto second = gpt.forward(ids).to_vector();
  gpt.set_dropout(true, 1);
  EXPECT_TRUE(bitwise_equal(gpt.forward(ids).to_vector(), first));
  EXPECT_FALSE(bitwise_equal(second, first));
  gpt.set_dropout(false, 1);
  EXPECT_TRUE(bitwise_equal(gpt.forward(ids).to_vector(), plain.forward(ids).to_vector()));
}

TEST(Gpt, BadConfigsAreInputErrors) {
  Rng rng(60);
  nn::GptConfig cfg = tiny_gpt();
  cfg.heads = 3;  // 8 features do not split into 3 heads
  EXPECT_THROW(nn::Gpt(cfg, rng), InputError);
  cfg = tiny_gpt(1.0f);
  EXPECT_THROW(nn::Gpt(cfg, rng), InputError);
  cfg = tiny_gpt();
  cfg.vocab = 0;
  EXPECT_THROW(nn::Gpt(cfg, rng), InputError);
}

// ---- training pieces ---------------------------------------------------------------

// AdamW decays the weight matrices only: not biases, LayerNorm, or the embeddings.
TEST(AdamWRule, DecaysWeightMatricesOnly) {
  Rng rng(70);
  nn::Gpt gpt(tiny_gpt(), rng);
  for (Parameter* p : gpt.parameters()) {
    const bool matrix = p->name.ends_with("c_attn.weight") || p->name.ends_with("c_fc.weight") ||
                        p->name.ends_with("c_proj.weight");
    EXPECT_EQ(nn::decays(*p), matrix) << p->name;
  }
}

// clip_grad_norm returns the global norm and scales every gradient by
// max_norm / (norm + 1e-6) when above it; below, it changes nothing.
TEST(GradClip, ScalesTheGlobalNormDownToTheLimit) {
  std::vector<Parameter> ps = {{"a", Tensor::zeros({2}), Tensor::from_vector({2}, {3, 0})},
                               {"b", Tensor::zeros({1, 1}), Tensor::from_vector({1, 1}, {4})}};
  auto opt = nn::make_optimizer({.name = "sgd", .lr = 0.1f}, {&ps[0], &ps[1]});
  EXPECT_FLOAT_EQ(opt->clip_grad_norm(10.0f), 5.0f);  // below the limit: unchanged
  EXPECT_EQ(ps[0].grad.to_vector(), (std::vector<float>{3, 0}));
  EXPECT_FLOAT_EQ(opt->clip_grad_norm(1.0f), 5.0f);
  const float k = 1.0f / (5.0f + 1e-6f);
  EXPECT_FLOAT_EQ(ps[0].grad.to_vector()[0], 3 * k);
  EXPECT_FLOAT_EQ(ps[1].grad.to_vector()[0], 4 * k);
  EXPECT_NEAR(opt->clip_grad_norm(0.0f), 1.0, 1e-5);  // 0: no clipping, the norm still measured
}

// Linear warm-up to lr, cosine to lr_min at the last step; lr_min < 0: constant after warm-up.
TEST(LrSchedule, WarmUpThenCosineToTheMinimum) {
  const nn::LrSchedule s{.lr = 1.0f, .lr_min = 0.1f, .warmup = 4, .total = 14};
  EXPECT_FLOAT_EQ(nn::lr_at(s, 1), 0.25f);
  EXPECT_FLOAT_EQ(nn::lr_at(s, 4), 1.0f);
  EXPECT_FLOAT_EQ(nn::lr_at(s, 9), 0.55f);  // halfway through the decay: the midpoint
  EXPECT_FLOAT_EQ(nn::lr_at(s, 14), 0.1f);
  EXPECT_FLOAT_EQ(nn::lr_at(s, 20), 0.1f);  // beyond the end: the minimum
  for (int64_t t = 5; t < 14; ++t) EXPECT_LT(nn::lr_at(s, t + 1), nn::lr_at(s, t)) << t;
  const nn::LrSchedule constant{.lr = 0.5f, .lr_min = -1.0f, .warmup = 0, .total = 10};
  for (int64_t t = 1; t <= 12; ++t) EXPECT_EQ(nn::lr_at(constant, t), 0.5f);
}

}  // namespace
}  // namespace mddp::test
