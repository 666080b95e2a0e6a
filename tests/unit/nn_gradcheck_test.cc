// core/nn gradients against central finite differences, and the contracts
// DDP builds on: grad-ready hooks (order, once, final values) and gradient
// accumulation.
//
// How the checks are made. The loss is recomputed in double, by an
// independent formula (gradcheck.h: xent_ref, mse_ref, or dot_ref = sum y*r,
// whose gradient in y is exactly r), from the module's float output. Each
// input and parameter element is moved by +-eps and
//   numeric = (L(+eps) - L(-eps)) / (2 eps),
// compared element-wise with the analytic gradient from backward:
//   |analytic - numeric| <= kRtol |numeric| + kAtolFrac * G,
// G the largest |numeric| over the input and all parameters of the module.
// Step and tolerances: eps = 1e-2, kRtol = 2e-3, kAtolFrac = 2e-4. The float
// forward puts ~1e-7 absolute noise in L (~5e-6 after dividing by 2 eps), the
// piecewise-linear layers are exact up to that, and the losses add O(eps^2)
// truncation; the worst measured error is ~3e-5 G, about 12x inside the
// bound. A missing factor of 2 is a 50% error and a transposed or misrouted
// gradient an O(1) error, both far outside it (so is a 1% scale error).
// Kinks: single-layer inputs are built away from ReLU's kink (|x| >= 5 eps)
// and from max-pool ties (window values 5 eps apart). In compositions, every
// evaluation also records the forward's discrete pattern (ReLU signs, max-pool
// winners); a step that changes it straddled a kink and is retried with half
// the step (numeric_grad's `smooth`), so no check depends on a lucky seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>
#include <vector>

#include "core/common/check.h"
#include "core/nn/layers.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "core/nn/sequential.h"
#include "core/tensor/ops.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

using nn::Module;
using nn::Parameter;

constexpr double kRtol = 2e-3;
constexpr double kAtolFrac = 2e-4;

enum class Head { kDot, kXent, kMse };

const char* head_name(Head h) {
  return h == Head::kDot ? "dot" : h == Head::kXent ? "xent" : "mse";
}

// The loss of the module's current output, in double, by the reference formula.
double reference_loss(const Tensor& y, Head head, const Tensor& target) {
  switch (head) {
    case Head::kDot:
      return dot_ref(y.to_vector(), target.to_vector());
    case Head::kXent:
      return xent_ref(y.to_vector(), target.to_vector(), y.dim(0), y.dim(1));
    case Head::kMse:
      return mse_ref(y.to_vector(), target.to_vector());
  }
  return 0.0;
}

// The target each head needs for an output of `out_shape`: the projection r
// for kDot, class labels for kXent, a regression target for kMse.
Tensor make_target(const Shape& out_shape, Head head, Rng& rng) {
  if (head == Head::kXent) return random_labels(out_shape[0], out_shape[1], rng);
  return random_tensor(out_shape, rng);
}

// The discrete state of a forward pass: for every ReLU, which outputs are
// positive; for every MaxPool2d, which inputs won a window (equal an output of
// their plane). A finite difference is valid only if it leaves this unchanged.
using Pattern = std::vector<uint8_t>;

void record_pattern(Module& layer, const Tensor& in, const Tensor& out, Pattern& pattern) {
  if (dynamic_cast<nn::ReLU*>(&layer)) {
    for (float v : out.to_vector()) pattern.push_back(v > 0.0f);
  } else if (dynamic_cast<nn::MaxPool2d*>(&layer)) {
    const auto xv = in.to_vector(), yv = out.to_vector();
    const int64_t in_plane = in.dim(2) * in.dim(3), out_plane = out.dim(2) * out.dim(3);
    for (int64_t p = 0; p < in.dim(0) * in.dim(1); ++p) {
      std::vector<float> winners(yv.begin() + p * out_plane, yv.begin() + (p + 1) * out_plane);
      std::sort(winners.begin(), winners.end());
      for (int64_t i = 0; i < in_plane; ++i)
        pattern.push_back(std::binary_search(winners.begin(), winners.end(), xv[p * in_plane + i]));
    }
  }
}

// m.forward(x), run child by child for a Sequential so every layer's pattern is recorded.
const Tensor& forward_recording(Module& m, const Tensor& x, Pattern& pattern) {
  pattern.clear();
  auto* seq = dynamic_cast<nn::Sequential*>(&m);
  if (seq == nullptr) {
    const Tensor& y = m.forward(x);
    record_pattern(m, x, y, pattern);
    return y;
  }
  const Tensor* h = &x;
  for (std::size_t i = 0; i < seq->size(); ++i) {
    const Tensor& y = seq->child(i).forward(*h);
    record_pattern(seq->child(i), *h, y, pattern);
    h = &y;
  }
  return *h;
}

constexpr float kEps = 1e-2f;

// Checks d loss / d x and d loss / d p for every parameter p of m against
// central differences. The analytic gradient comes from m.backward() fed by
// the nn loss class's backward (or by r itself for kDot); the loss class's
// forward value is also checked against the reference formula.
void check_gradients(Module& m, Tensor& x, Head head, uint64_t seed) {
  SCOPED_TRACE(
      str(m.describe(), " input ", tensor::shape_str(x.shape()), " loss ", head_name(head)));
  Rng rng(seed);
  m.zero_grad();
  const Tensor& y = m.forward(x);
  const Tensor target = make_target(y.shape(), head, rng);
  const double l0 = reference_loss(y, head, target);

  std::unique_ptr<nn::Loss> loss;
  const Tensor* dy = &target;
  if (head != Head::kDot) {
    loss = nn::make_loss(head == Head::kXent ? "xent" : "mse");
    const float value = loss->forward(y, target);
    EXPECT_NEAR(value, l0, 1e-5 * std::max(1.0, std::abs(l0))) << "loss forward";
    dy = &loss->backward();
  }
  const std::vector<float> dx = m.backward(*dy).to_vector();
  std::vector<std::vector<float>> grads;
  for (Parameter* p : m.parameters()) grads.push_back(p->grad.to_vector());

  // Cross-entropy over a single class is constant (log 1 = 0): there every
  // gradient must be exactly zero rather than match a non-zero scale.
  const bool constant_loss = head == Head::kXent && y.dim(1) == 1;
  Pattern base, now;
  forward_recording(m, x, base);
  auto f = [&] { return reference_loss(forward_recording(m, x, now), head, target); };
  auto smooth = [&] { return now == base; };
  std::vector<std::vector<double>> numeric = {numeric_grad(x, f, kEps, smooth)};
  for (Parameter* p : m.parameters()) numeric.push_back(numeric_grad(p->value, f, kEps, smooth));
  // atol is relative to the largest gradient anywhere in the module: the noise
  // in L is the same for every element, however small its own gradient.
  double scale = 0.0;
  for (const auto& g : numeric)
    for (double v : g) scale = std::max(scale, std::abs(v));
  EXPECT_TRUE(all_close("dx", numeric[0], dx, kRtol, kAtolFrac, constant_loss, scale));
  std::size_t i = 0;
  for (Parameter* p : m.parameters()) {
    EXPECT_TRUE(
        all_close("d" + p->name, numeric[i + 1], grads[i], kRtol, kAtolFrac, constant_loss, scale));
    ++i;
  }
}

// Random values with |v| in [margin, 1]: no element sits within `margin` of a ReLU kink.
Tensor away_from_zero(const Shape& shape, Rng& rng, float margin) {
  std::vector<float> v = random_values(tensor::numel_of(shape), rng, margin, 1.0f);
  for (float& x : v)
    if (rng.uniform() < 0.5f) x = -x;
  return Tensor::from_vector(shape, v);
}

// Inputs for max pooling without near-ties: each plane is a random permutation
// of 0, gap, 2 gap, ... (shifted), so every window's values are `gap` apart.
Tensor distinct_values(const Shape& shape, Rng& rng, float gap) {
  const int64_t plane = shape[2] * shape[3];
  std::vector<float> v(static_cast<std::size_t>(tensor::numel_of(shape)));
  for (int64_t p = 0; p < tensor::numel_of(shape) / plane; ++p) {
    std::vector<int64_t> perm(static_cast<std::size_t>(plane));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = plane - 1; i > 0; --i)
      std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i + 1))]);
    for (int64_t i = 0; i < plane; ++i)
      v[p * plane + i] = gap * static_cast<float>(perm[i]) - 0.5f * gap * plane;
  }
  return Tensor::from_vector(shape, v);
}

// ---- single layers -----------------------------------------------------------

// Linear: dx, dW and db match finite differences for batch 1 and odd sizes, through all heads.
TEST(GradCheck, Linear) {
  Rng rng(100);
  for (auto [n, in, out] : {std::array<int64_t, 3>{1, 1, 1}, {1, 3, 2}, {5, 7, 3}, {4, 6, 6}})
    for (Head head : {Head::kDot, Head::kXent, Head::kMse}) {
      nn::Linear lin(in, out, rng);
      Tensor x = random_tensor({n, in}, rng);
      check_gradients(lin, x, head, 1000 + n * 10 + in);
    }
}

// ReLU (no parameters): dx matches finite differences with inputs kept away from the kink.
TEST(GradCheck, ReLU) {
  Rng rng(101);
  for (const Shape& shape : {Shape{1, 1}, Shape{3, 5}, Shape{2, 3, 3, 5}}) {
    nn::ReLU relu;
    Tensor x = away_from_zero(shape, rng, 5 * kEps);
    check_gradients(relu, x, Head::kDot, 1);
    check_gradients(relu, x, Head::kMse, 2);
    if (shape.size() == 2) check_gradients(relu, x, Head::kXent, 3);
  }
}

// Conv2d: dx, dW and db match finite differences (k = 1, 3, 5; C, O, N > 1; odd H, W).
TEST(GradCheck, Conv2d) {
  struct Case {
    int64_t n, c, h, w, o;
    int k;
  };
  Rng rng(102);
  for (const Case& d : {Case{1, 1, 1, 1, 1, 1}, Case{1, 1, 4, 4, 1, 3}, Case{2, 3, 5, 7, 4, 3},
                        Case{3, 2, 3, 5, 2, 5}, Case{1, 2, 3, 3, 3, 1}}) {
    nn::Conv2d conv(d.c, d.o, d.k, rng);
    Tensor x = random_tensor({d.n, d.c, d.h, d.w}, rng);
    check_gradients(conv, x, Head::kDot, 7);
    check_gradients(conv, x, Head::kMse, 8);
  }
}

// MaxPool2d: dx matches finite differences (no ties), including floor-mode leftovers.
TEST(GradCheck, MaxPool2d) {
  Rng rng(103);
  for (auto [shape, k] : {std::pair{Shape{1, 1, 2, 2}, 2}, std::pair{Shape{2, 3, 5, 7}, 2},
                          std::pair{Shape{1, 2, 6, 6}, 3}}) {
    nn::MaxPool2d pool(k);
    Tensor x = distinct_values(shape, rng, 5 * kEps);
    check_gradients(pool, x, Head::kDot, 9);
    check_gradients(pool, x, Head::kMse, 10);
  }
}

// Flatten: a reshape both ways; dx matches finite differences through xent and mse.
TEST(GradCheck, Flatten) {
  Rng rng(104);
  for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{3, 2, 3, 1}, Shape{2, 5}}) {
    nn::Flatten flat;
    Tensor x = random_tensor(shape, rng);
    check_gradients(flat, x, Head::kDot, 11);
    check_gradients(flat, x, Head::kXent, 12);
    check_gradients(flat, x, Head::kMse, 13);
  }
}

// ---- compositions ------------------------------------------------------------

// Sequential MLP (Linear, ReLU, Linear, ReLU, Linear): all gradients match finite
// differences through both losses, batch 1 and odd sizes.
TEST(GradCheck, SequentialMlp) {
  for (int64_t n : {1, 3})
    for (Head head : {Head::kXent, Head::kMse}) {
      Rng rng(200 + n);
      nn::Sequential seq;
      seq.add(std::make_unique<nn::Linear>(5, 7, rng));
      seq.add(std::make_unique<nn::ReLU>());
      seq.add(std::make_unique<nn::Linear>(7, 4, rng));
      seq.add(std::make_unique<nn::ReLU>());
      seq.add(std::make_unique<nn::Linear>(4, 3, rng));
      Tensor x = random_tensor({n, 5}, rng);
      check_gradients(seq, x, head, 210 + n);
    }
}

// Sequential CNN (Conv, ReLU, MaxPool, Flatten, Linear): all gradients match finite
// differences through both losses.
TEST(GradCheck, SequentialCnn) {
  for (Head head : {Head::kXent, Head::kMse}) {
    Rng rng(300);
    nn::Sequential seq;
    seq.add(std::make_unique<nn::Conv2d>(2, 3, 3, rng));
    seq.add(std::make_unique<nn::ReLU>());
    seq.add(std::make_unique<nn::MaxPool2d>(2));
    seq.add(std::make_unique<nn::Flatten>());
    seq.add(std::make_unique<nn::Linear>(3 * 2 * 3, 4, rng));
    Tensor x = random_tensor({2, 2, 5, 7}, rng);
    check_gradients(seq, x, head, 301);
  }
}

// build_model("cnn") with tiny channels on 8x8 inputs: every gradient end to end,
// batch 1 and 3, through both losses.
TEST(GradCheck, BuildModelCnnEndToEnd) {
  nn::ModelConfig cfg;
  cfg.kind = "cnn";
  cfg.channels = {2, 3};
  cfg.hidden = 5;
  cfg.classes = 3;
  cfg.seed = 5;
  auto model = nn::build_model(cfg, {1, 8, 8});
  ASSERT_EQ(model->parameters().size(), 8u);
  Rng rng(400);
  for (int64_t n : {1, 3})
    for (Head head : {Head::kXent, Head::kMse}) {
      Tensor x = random_tensor({n, 1, 8, 8}, rng);
      check_gradients(*model, x, head, 401 + n);
    }
}

// build_model("mlp"), with a class head (xent) and without one (mse): every gradient.
TEST(GradCheck, BuildModelMlpEndToEnd) {
  nn::ModelConfig cfg;
  cfg.width = 6;
  cfg.depth = 2;
  cfg.classes = 4;
  cfg.seed = 6;
  auto model = nn::build_model(cfg, {1, 3, 3});
  Rng rng(500);
  Tensor x = random_tensor({3, 1, 3, 3}, rng);
  check_gradients(*model, x, Head::kXent, 501);

  cfg.classes = 0;  // the benchmark's square MLP with MSE: no head, no final ReLU
  cfg.width = 5;
  auto square = nn::build_model(cfg, {5});
  Tensor xs = random_tensor({4, 5}, rng);
  check_gradients(*square, xs, Head::kMse, 502);
}

// ---- grad-ready hooks (Note [Grad-ready hooks]) --------------------------------

struct HookEvent {
  Parameter* param;
  std::vector<float> grad_at_fire;
};

nn::ModelConfig tiny_cnn_config() {
  nn::ModelConfig cfg;
  cfg.kind = "cnn";
  cfg.channels = {2, 3};
  cfg.hidden = 5;
  cfg.classes = 3;
  return cfg;
}

// Runs forward/backward once with a recording hook and checks: each parameter fires
// exactly once, in the reverse of parameters() order, with its final gradient.
void check_hooks(nn::Module& model, const Tensor& x, int64_t classes) {
  std::vector<HookEvent> events;
  model.set_grad_ready_hook([&](Parameter& p) { events.push_back({&p, p.grad.to_vector()}); });
  Rng rng(600);
  Tensor labels = random_labels(x.dim(0), classes, rng);
  nn::CrossEntropyLoss loss;
  model.zero_grad();
  loss.forward(model.forward(x), labels);
  model.backward(loss.backward(), /*need_dx=*/false);

  std::vector<Parameter*> params = model.parameters();
  std::vector<Parameter*> want(params.rbegin(), params.rend());
  ASSERT_EQ(events.size(), want.size()) << "one event per parameter per backward";
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events[i].param, want[i])
        << "event " << i << " is " << events[i].param->name << ", expected " << want[i]->name;
    EXPECT_TRUE(bitwise_equal(events[i].grad_at_fire, events[i].param->grad.to_vector()))
        << events[i].param->name << " changed after its hook fired";
  }
}

// CNN: hooks fire once per parameter, last layer first, each with its final gradient.
TEST(Hooks, CnnFireOnceInReverseOrderWithFinalGrads) {
  auto model = nn::build_model(tiny_cnn_config(), {1, 8, 8});
  Rng rng(601);
  check_hooks(*model, random_tensor({2, 1, 8, 8}, rng), 3);
}

// MLP: the same contract, and a second backward fires every hook again exactly once.
TEST(Hooks, MlpFireOnceInReverseOrderEveryBackward) {
  nn::ModelConfig cfg;
  cfg.width = 4;
  cfg.depth = 3;
  cfg.classes = 3;
  auto model = nn::build_model(cfg, {6});
  Rng rng(602);
  Tensor x = random_tensor({5, 6}, rng);
  check_hooks(*model, x, 3);
  check_hooks(*model, x, 3);
}

// A hook set on a Sequential reaches layers added after it was set.
TEST(Hooks, SetBeforeAddReachesNewLayers) {
  nn::Sequential seq;
  int fired = 0;
  seq.set_grad_ready_hook([&](Parameter&) { ++fired; });
  Rng rng(603);
  seq.add(std::make_unique<nn::Linear>(3, 2, rng));
  seq.add(std::make_unique<nn::Linear>(2, 2, rng));
  Tensor x = random_tensor({1, 3}, rng), dy = random_tensor({1, 2}, rng);
  seq.forward(x);
  seq.backward(dy);
  EXPECT_EQ(fired, 4);
}

// ---- accumulation --------------------------------------------------------------

// Two backwards without zero_grad sum their gradients (PyTorch semantics); zero_grad
// resets every gradient to exactly 0.
TEST(Accumulation, TwoBackwardsSumAndZeroGradResets) {
  auto model = nn::build_model(tiny_cnn_config(), {1, 8, 8});
  Rng rng(700);
  Tensor x1 = random_tensor({2, 1, 8, 8}, rng), x2 = random_tensor({3, 1, 8, 8}, rng);
  Tensor y1 = random_labels(2, 3, rng), y2 = random_labels(3, 3, rng);
  nn::CrossEntropyLoss loss;
  auto run = [&](const Tensor& x, const Tensor& y) {
    loss.forward(model->forward(x), y);
    model->backward(loss.backward());
  };
  auto grads = [&] {
    std::vector<std::vector<float>> g;
    for (Parameter* p : model->parameters()) g.push_back(p->grad.to_vector());
    return g;
  };
  model->zero_grad();
  run(x1, y1);
  const auto g1 = grads();
  model->zero_grad();
  run(x2, y2);
  const auto g2 = grads();
  model->zero_grad();
  run(x1, y1);
  run(x2, y2);
  const auto both = grads();
  for (std::size_t i = 0; i < both.size(); ++i) {
    std::vector<double> want(g1[i].size());
    for (std::size_t j = 0; j < want.size(); ++j) want[j] = double{g1[i][j]} + g2[i][j];
    EXPECT_TRUE(all_close(model->parameters()[i]->name, want, both[i], 1e-5, 1e-6));
  }
  model->zero_grad();
  for (Parameter* p : model->parameters())
    EXPECT_EQ(p->grad.to_vector(), std::vector<float>(p->grad.numel(), 0.0f)) << p->name;
}

// ---- errors ----------------------------------------------------------------------

// Layers and losses reject inputs of the wrong shape, bad labels and bad configs.
TEST(Errors, LayersRejectBadInputs) {
  Rng rng(800);
  nn::Linear lin(4, 3, rng);
  EXPECT_THROW(lin.forward(Tensor::zeros({2, 5})), std::logic_error);
  EXPECT_THROW(lin.forward(Tensor::zeros({2, 2, 2})), std::logic_error);
  nn::Conv2d conv(2, 3, 3, rng);
  EXPECT_THROW(conv.forward(Tensor::zeros({1, 3, 5, 5})), std::logic_error);
  EXPECT_THROW(nn::Conv2d(1, 1, 2, rng), std::logic_error);  // even kernel: no "same" padding
  nn::MaxPool2d pool(2);
  EXPECT_THROW(pool.forward(Tensor::zeros({4, 4})), std::logic_error);
  EXPECT_THROW(pool.backward(Tensor::zeros({1, 1, 1, 1}), true),
               std::logic_error);  // before forward
  nn::Linear fresh(2, 2, rng);
  EXPECT_THROW(fresh.backward(Tensor::zeros({1, 2}), true), std::logic_error);

  nn::CrossEntropyLoss xent;
  Tensor logits = Tensor::zeros({2, 3});
  EXPECT_THROW(xent.forward(logits, Tensor::from_vector({2}, {0, 3})), std::logic_error);
  EXPECT_THROW(xent.forward(logits, Tensor::from_vector({2}, {-1, 0})), std::logic_error);
  EXPECT_THROW(xent.forward(logits, Tensor::zeros({3})), std::logic_error);
  nn::MSELoss mse;
  EXPECT_THROW(mse.forward(logits, Tensor::zeros({2, 2})), std::logic_error);

  EXPECT_THROW(nn::make_loss("hinge"), InputError);
  nn::ModelConfig cnn = tiny_cnn_config();
  EXPECT_THROW(nn::build_model(cnn, {64}), InputError);  // a CNN needs [C, H, W]
  cnn.kind = "transformer";
  EXPECT_THROW(nn::build_model(cnn, {1, 8, 8}), InputError);
}

// Building a model on a CUDA device without a GPU is a clear InputError, not a crash.
TEST(Errors, ModelOnCudaWithoutGpuIsInputError) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const std::string msg = thrown_message<InputError>([] {
    nn::build_model(tiny_cnn_config(), {1, 8, 8}, tensor::Device::parse("cuda:0"));
  });
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mddp::test
