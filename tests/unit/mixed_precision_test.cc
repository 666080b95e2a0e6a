// Mixed precision (--precision): the 16-bit GEMMs against a double-precision
// reference on 16-bit-rounded inputs, the thread-local autocast scope, the
// loss scaler's rules with a planted overflow (unit and in a training step),
// and bf16 training on Fashion-MNIST within 0.5 % of fp32's test accuracy.
#include "core/train/mixed_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include "core/common/check.h"
#include "core/common/half.h"
#include "core/common/rng.h"
#include "core/data/factory.h"
#include "core/tensor/ops.h"
#include "core/tensor/precision.h"
#include "core/train/loss_scaler.h"
#include "core/train/trainer.h"

namespace mddp {
namespace {

using tensor::Precision;
using tensor::Tensor;

float round_to(HalfFormat f, float v) {
  return f == HalfFormat::kBf16 ? bf16_to_float(float_to_bf16(v)) : fp16_to_float(float_to_fp16(v));
}

// c = alpha op(a) op(b) + beta c0 in double, the inputs first rounded to `f` (or not, without f).
std::vector<double> reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const std::vector<float>& a, const std::vector<float>& b, float beta,
                              const std::vector<float>& c0, const HalfFormat* f) {
  const auto in = [&](float v) { return static_cast<double>(f ? round_to(*f, v) : v); };
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += in(a[ta ? p * m + i : i * k + p]) * in(b[tb ? j * k + p : p * n + j]);
      c[i * n + j] = alpha * s + beta * static_cast<double>(c0[i * n + j]);
    }
  return c;
}

std::vector<float> random_vector(int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.uniform(-2.0f, 2.0f);
  return v;
}

struct GemmCase {
  Precision precision;
  bool ta, tb;
};

class HalfGemm : public ::testing::TestWithParam<GemmCase> {};

// Within fp32 accumulation error of the exact product of the rounded inputs,
// and far from the product of the unrounded ones (the rounding happened).
TEST_P(HalfGemm, IsTheExactProductOfRoundedInputs) {
  const GemmCase g = GetParam();
  const HalfFormat f = g.precision == Precision::kBf16 ? HalfFormat::kBf16 : HalfFormat::kFp16;
  Rng rng(7);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 10, 784}})
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, -2.0f}}) {
      const auto a = random_vector(m * k, rng), b = random_vector(k * n, rng),
                 c0 = random_vector(m * n, rng);
      Tensor ta = Tensor::from_vector(g.ta ? tensor::Shape{k, m} : tensor::Shape{m, k}, a);
      Tensor tb = Tensor::from_vector(g.tb ? tensor::Shape{n, k} : tensor::Shape{k, n}, b);
      Tensor tc = Tensor::from_vector({m, n}, c0);
      {
        const tensor::PrecisionScope scope(g.precision);
        tensor::gemm(g.ta, g.tb, alpha, ta, tb, beta, tc);
      }
      const auto got = tc.to_vector();
      const auto want = reference(g.ta, g.tb, m, n, k, alpha, a, b, beta, c0, &f);
      const auto unrounded = reference(g.ta, g.tb, m, n, k, alpha, a, b, beta, c0, nullptr);
      double worst = 0, off = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        // fp32 accumulation of k products of magnitude <= 4: k * 2^-23 * 4 per term, and c0's
        // rounding.
        const double tol = 1e-6 * (4.0 * static_cast<double>(k) + 4.0);
        worst = std::max(worst, std::abs(got[i] - want[i]) / tol);
        off = std::max(off, std::abs(got[i] - unrounded[i]));
      }
      EXPECT_LE(worst, 1.0) << "m=" << m << " n=" << n << " k=" << k << ": the error is " << worst
                            << " times the tolerance";
      if (k >= 3) {
        EXPECT_GT(off, 1e-4) << "m=" << m << " n=" << n << " k=" << k
                             << ": the inputs were not rounded";
      }
    }
}

INSTANTIATE_TEST_SUITE_P(PrecisionsAndTransposes, HalfGemm,
                         ::testing::Values(GemmCase{Precision::kBf16, false, false},
                                           GemmCase{Precision::kBf16, false, true},
                                           GemmCase{Precision::kBf16, true, false},
                                           GemmCase{Precision::kBf16, true, true},
                                           GemmCase{Precision::kFp16, false, false},
                                           GemmCase{Precision::kFp16, true, true}),
                         [](const auto& info) {
                           return std::string(tensor::to_string(info.param.precision)) +
                                  (info.param.ta ? "_T" : "_N") + (info.param.tb ? "T" : "N");
                         });

// fp16's range ends at 65504: a larger input becomes infinity, as on hardware.
TEST(HalfGemmFp16, OverflowsToInfinity) {
  Tensor a = Tensor::from_vector({1, 1}, {70000.0f}), b = Tensor::from_vector({1, 1}, {1.0f});
  Tensor c = Tensor::zeros({1, 1});
  const tensor::PrecisionScope scope(Precision::kFp16);
  tensor::gemm(false, false, 1.0f, a, b, 0.0f, c);
  EXPECT_TRUE(std::isinf(c.to_vector()[0]));
}

TEST(PrecisionScope, BelongsToTheThreadAndNests) {
  EXPECT_EQ(tensor::gemm_precision(), Precision::kFp32);
  {
    const tensor::PrecisionScope outer(Precision::kBf16);
    EXPECT_EQ(tensor::gemm_precision(), Precision::kBf16);
    Precision other = Precision::kBf16;
    std::thread([&] { other = tensor::gemm_precision(); }).join();
    EXPECT_EQ(other, Precision::kFp32);
    {
      const tensor::PrecisionScope inner(Precision::kFp32);
      EXPECT_EQ(tensor::gemm_precision(), Precision::kFp32);
    }
    EXPECT_EQ(tensor::gemm_precision(), Precision::kBf16);
  }
  EXPECT_EQ(tensor::gemm_precision(), Precision::kFp32);
  EXPECT_THROW(tensor::parse_precision("fp8"), InputError);
}

// ---- the loss scaler --------------------------------------------------------

struct Grads {
  std::vector<nn::Parameter> storage;
  std::vector<nn::Parameter*> ptrs;
  explicit Grads(std::vector<std::vector<float>> gs) {
    for (auto& g : gs) {
      const int64_t n = static_cast<int64_t>(g.size());
      storage.push_back({"p", Tensor::zeros({n}), Tensor::from_vector({n}, g)});
    }
    for (auto& p : storage) ptrs.push_back(&p);
  }
};

TEST(LossScaler, PlantedOverflowSkipsAndHalvesGoodStepsGrow) {
  train::LossScaler s(true, {.init = 1024.0f, .window = 3});
  Grads ok({{1024.0f, -2048.0f}, {512.0f}});
  ASSERT_TRUE(s.unscale(ok.ptrs, 0.5f));  // divided by the scale, times the micro-batch factor
  EXPECT_EQ(ok.storage[0].grad.to_vector(), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(ok.storage[1].grad.to_vector(), (std::vector<float>{0.25f}));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.good_steps(), 1);

  for (float planted : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    Grads bad({{1.0f, 2.0f}, {planted}});
    const float before = s.scale();
    EXPECT_FALSE(s.unscale(bad.ptrs, 1.0f));
    EXPECT_EQ(s.scale(), before / 2);
    EXPECT_EQ(s.good_steps(), 0);
    EXPECT_EQ(bad.storage[0].grad.to_vector(), (std::vector<float>{1.0f, 2.0f}))
        << "gradients left alone";
  }
  EXPECT_EQ(s.skipped_steps(), 2);
  for (int i = 0; i < 3; ++i) {
    Grads g(std::vector<std::vector<float>>{{1.0f}});
    ASSERT_TRUE(s.unscale(g.ptrs, 1.0f));
  }
  EXPECT_EQ(s.scale(), 512.0f) << "3 good steps in a row double the scale";
  EXPECT_EQ(s.good_steps(), 0);

  train::LossScaler copy(true, {});
  copy.restore(s.state_json(), "test");
  EXPECT_EQ(copy.scale(), s.scale());
  EXPECT_EQ(copy.skipped_steps(), 2);
  EXPECT_THROW(copy.restore("{\"scale\": -1, \"good_steps\": 0, \"skipped\": 0}", "test"),
               InputError);

  train::LossScaler off(false, {});  // fp32/bf16: no scaling, no skipping
  Grads inf(std::vector<std::vector<float>>{{std::numeric_limits<float>::infinity()}});
  EXPECT_TRUE(off.unscale(inf.ptrs, 1.0f));
  EXPECT_EQ(off.scale(), 1.0f);
}

train::TrainConfig small_fp16_config() {  // a small synthetic job with the default optimiser (Adam)
  train::TrainConfig c;
  c.data = {.spec = "synthetic", .synthetic_size = 128};
  c.model.width = 8;
  c.batch = 8;
  c.eval = false;
  c.precision = "fp16";
  return c;
}

std::vector<std::vector<float>> weights(train::Trainer& t) {
  std::vector<std::vector<float>> out;
  for (auto* p : t.model().parameters()) out.push_back(p->value.to_vector());
  return out;
}

// A loss scale of 2^40 makes the scaled gradients overflow fp16 in the
// backward GEMMs: the steps are skipped (the weights do not move) and the
// scale halves each time, until the gradients fit and training proceeds.
TEST(LossScaling, APlantedOverflowSkipsTheStepAndLowersTheScale) {
  train::TrainConfig c = small_fp16_config();
  c.loss_scale.init = std::ldexp(1.0f, 40);
  train::Trainer t(c);
  const auto before = weights(t);
  t.step();
  EXPECT_EQ(weights(t), before) << "an overflowing step must not change the weights";
  EXPECT_EQ(t.loss_scaler().skipped_steps(), 1);
  EXPECT_EQ(t.loss_scaler().scale(), std::ldexp(1.0f, 39));
  int steps = 1;
  while (t.loss_scaler().skipped_steps() == steps && steps < 40) {
    t.step();
    ++steps;
  }
  EXPECT_LT(t.loss_scaler().skipped_steps(), steps) << "the scale never came down far enough";
  EXPECT_EQ(t.loss_scaler().scale(),
            std::ldexp(1.0f, 40 - static_cast<int>(t.loss_scaler().skipped_steps())))
      << "halved once per skipped step, not grown (the window is 2000 steps)";
  EXPECT_NE(weights(t), before) << "the first step that fits moved the weights";
  // DDP sends fp16 gradients by default under fp16, fp32 under fp32.
  train::TrainConfig fp32 = small_fp16_config();
  fp32.precision = "fp32";
  EXPECT_EQ(train::effective_compress(fp32), "none");
  EXPECT_EQ(train::effective_compress(c), "fp16");
}

// ZeRO-1 keeps the gradients fp32 on the wire under bf16 unless --compress
// asks for 16 bits, which it then reduce-scatters; fp16 (whose overflow check
// would see only a shard) is refused, and so is top-k; each at validation,
// before any rank starts.
TEST(MixedPrecision, ShardedKeepsFp32GradientsAndRefusesFp16) {
  train::TrainConfig c = small_fp16_config();
  c.dist.ddp = "sharded";
  c.precision = "bf16";
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(train::effective_compress(c), "none");
  c.precision = "fp16";
  EXPECT_THROW(c.validate(), InputError);
  c.precision = "bf16";
  c.dist.compress = "bf16";
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(train::effective_compress(c), "bf16");
  c.dist.compress = "topk:0.1";
  EXPECT_THROW(c.validate(), InputError);
}

// bf16 GEMMs train the default MLP on Fashion-MNIST to within 0.5 % (points)
// of fp32's test accuracy after the same steps from the same seed.
TEST(MixedPrecision, Bf16MatchesFp32AccuracyOnFashionMnist) {
  if (!std::filesystem::exists(data::kFashionMnistDir))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto accuracy = [](const std::string& precision) {
    train::TrainConfig c;  // the defaults: Fashion-MNIST, FullMLP, Adam
    c.steps = 600;
    c.precision = precision;
    train::Trainer t(c);
    for (int i = 0; i < c.steps; ++i) t.step();
    return t.evaluate().accuracy;
  };
  const double fp32 = accuracy("fp32"), bf16 = accuracy("bf16");
  std::printf("test accuracy after 600 steps: fp32 %.4f, bf16 %.4f (%s)\n", fp32, bf16,
              tensor::cpu_gemm_description(Precision::kBf16).c_str());
  EXPECT_GT(fp32, 0.75);
  EXPECT_LE(std::abs(bf16 - fp32), 0.005) << "fp32 " << fp32 << " bf16 " << bf16;
}

}  // namespace
}  // namespace mddp
