// Every tensor op on cuda:0 against the same op on the CPU, the oracle
// (STYLE.md), on the same inputs: random shapes from a seeded generator, with
// the edge sizes 0, 1 and sizes that do not divide a block. Then a whole
// model's forward, backward and optimizer step on both devices.
//
// Tolerances, per element, relative to the tensor's largest |value| (so a
// near-cancelled sum is judged on the tensor's scale, see all_close):
//  * kExact: copies, fill, scale, relu, max-pool, bias_add, im2col-free paths:
//    the same single IEEE operation on both devices;
//  * kElementwise (1e-5): arithmetic the GPU may fuse into one FMA, and
//    expf/logf, which CUDA computes within 2 ulp;
//  * kSums (1e-4): sums of products (gemm, conv, bias_grad, losses), added in
//    another order by cuBLAS and the kernels. cuBLAS runs in plain FP32 (no
//    TF32; cuda/context.cu), without which these would differ at 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/common/check.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "core/nn/optimizer.h"
#include "core/tensor/ops.h"
#include "core/tensor/tensor.h"
#include "mddp/config.h"
#include "tests/gpu/devices.h"
#include "tests/unit/gradcheck.h"
#if MDDP_HAVE_CUDA
#include "core/tensor/cuda/context.h"
#endif

namespace mddp::test {
namespace {

namespace ops = tensor;

constexpr double kExact = 0.0;
constexpr double kElementwise = 1e-5;
constexpr double kSums = 1e-4;

// The same values on the CPU and on the GPU.
struct Pair {
  Tensor cpu, gpu;
};

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override { MDDP_REQUIRE_CUDA_DEVICES(1, "the CUDA ops"); }

  Pair pair(const Tensor& host) const { return {host, host.to(gpu_)}; }
  Pair random(const Shape& shape, float lo = -1.0f, float hi = 1.0f) {
    return pair(random_tensor(shape, rng_, lo, hi));
  }
  // NaN-filled outputs: an element an op forgets to write cannot match.
  Pair outputs(const Shape& shape) const {
    return pair(
        Tensor::from_vector(shape, std::vector<float>(tensor::numel_of(shape), std::nanf(""))));
  }
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_.below(static_cast<uint64_t>(hi - lo + 1)));
  }

  static void expect_close(const std::string& what, const Pair& p, double tol) {
    EXPECT_TRUE(all_close(what, to_double(p.cpu.to_vector()), p.gpu.to_vector(), tol, tol, true));
  }

  const tensor::Device gpu_{tensor::DeviceType::kCuda, 0};
  Rng rng_{2024};
};

// 0, 1, a block size +- 1, odd random sizes, and one past the launch cap
// (2^16 blocks of 256 threads), which exercises the grid-stride loop.
std::vector<int64_t> element_counts(bool with_huge) {
  std::vector<int64_t> n = {0, 1, 255, 257, 1000, 12345};
  if (with_huge) n.push_back((int64_t{1} << 24) + 3);
  return n;
}

TEST_F(CudaVsCpu, ElementwiseOps) {
  for (const int64_t n : element_counts(false)) {
    SCOPED_TRACE(str("n=", n));
    Pair x = random({n}), y = random({n}), out = outputs({n}), out2 = outputs({n});
    ops::axpy(-0.7f, x.cpu, y.cpu);
    ops::axpy(-0.7f, x.gpu, y.gpu);
    expect_close("axpy", y, kElementwise);
    y = random({n});  // axpy's result may differ by an ulp (a fused multiply-add on the GPU)
    ops::scale(y.cpu, 1.5f);
    ops::scale(y.gpu, 1.5f);
    expect_close("scale", y, kExact);
    ops::copy(x.cpu, out.cpu);
    ops::copy(x.gpu, out.gpu);
    expect_close("copy", out, kExact);
    ops::relu_forward(x.cpu, out.cpu);
    ops::relu_forward(x.gpu, out.gpu);
    expect_close("relu_forward", out, kExact);
    ops::relu_backward(out.cpu, y.cpu, out2.cpu);
    ops::relu_backward(out.gpu, y.gpu, out2.gpu);
    expect_close("relu_backward", out2, kExact);
    if (n > 0) {
      const float lc = ops::mse_forward(x.cpu, y.cpu), lg = ops::mse_forward(x.gpu, y.gpu);
      EXPECT_NEAR(lg, lc, kSums * std::abs(lc)) << "mse_forward";
      ops::mse_backward(x.cpu, y.cpu, out.cpu);
      ops::mse_backward(x.gpu, y.gpu, out.gpu);
      expect_close("mse_backward", out, kElementwise);
    }
    ops::fill(out.cpu, 0.25f);
    ops::fill(out.gpu, 0.25f);
    expect_close("fill", out, kExact);
  }
}

TEST_F(CudaVsCpu, LargeArraysUseTheGridStrideLoop) {
  const int64_t n = element_counts(true).back();
  Pair x = random({n});
  ops::scale(x.cpu, -2.0f);
  ops::scale(x.gpu, -2.0f);
  expect_close("scale 2^24 + 3", x, kExact);
}

TEST_F(CudaVsCpu, GemmAllTransposesRandomShapes) {
  const std::pair<float, float> scalars[] = {
      {1.0f, 0.0f}, {1.0f, 1.0f}, {-1.5f, 0.25f}, {0.0f, 2.0f}};
  for (int trial = 0; trial < 12; ++trial) {
    // Mostly random sizes up to 300, plus edges: k = 0, 1-wide, and one larger product.
    int64_t m = uniform(1, 300), n = uniform(1, 300), k = uniform(1, 300);
    if (trial == 0) k = 0;
    if (trial == 1) m = n = 1;
    if (trial == 2) m = 512, n = 768, k = 1024;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (auto [alpha, beta] : scalars) {
          SCOPED_TRACE(str("m=", m, " n=", n, " k=", k, " ta=", ta, " tb=", tb, " alpha=", alpha,
                           " beta=", beta));
          Pair a = random(ta ? Shape{k, m} : Shape{m, k}),
               b = random(tb ? Shape{n, k} : Shape{k, n});
          Pair c = beta == 0.0f ? outputs({m, n}) : random({m, n});  // beta = 0 must not read c
          ops::gemm(ta, tb, alpha, a.cpu, b.cpu, beta, c.cpu);
          ops::gemm(ta, tb, alpha, a.gpu, b.gpu, beta, c.gpu);
          expect_close("gemm", c, kSums);
        }
  }
}

TEST_F(CudaVsCpu, BiasAddAndGrad) {
  for (const Shape& shape :
       {Shape{1, 1}, Shape{64, 256}, Shape{3, 5, 7, 9}, Shape{32, 64, 14, 14}, Shape{0, 4}}) {
    SCOPED_TRACE(ops::shape_str(shape));
    Pair y = random(shape), bias = random({shape[1]}), dy = random(shape), db = random({shape[1]});
    ops::bias_add(y.cpu, bias.cpu);
    ops::bias_add(y.gpu, bias.gpu);
    expect_close("bias_add", y, kExact);
    ops::bias_grad(dy.cpu, db.cpu);
    ops::bias_grad(dy.gpu, db.gpu);
    expect_close("bias_grad", db, kSums);
  }
}

TEST_F(CudaVsCpu, Conv2dForwardBackwardRandomShapes) {
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t n = uniform(1, 4), c = uniform(1, 5), o = uniform(1, 6),
                  k = 2 * uniform(0, 2) + 1;
    const int pad = static_cast<int>(uniform(0, k / 2 + 1));
    const int64_t h = uniform(std::max<int64_t>(1, k - 2 * pad), 12),
                  w = uniform(std::max<int64_t>(1, k - 2 * pad), 12);
    const int64_t ho = h + 2 * pad - k + 1, wo = w + 2 * pad - k + 1;
    SCOPED_TRACE(str("N=", n, " C=", c, " H=", h, " W=", w, " O=", o, " K=", k, " pad=", pad));
    Pair x = random({n, c, h, w}), wt = random({o, c, k, k}), b = random({o}),
         col = outputs({c * k * k, ho * wo});
    Pair y = outputs({n, o, ho, wo});
    ops::conv2d_forward(x.cpu, wt.cpu, b.cpu, pad, col.cpu, y.cpu);
    ops::conv2d_forward(x.gpu, wt.gpu, b.gpu, pad, col.gpu, y.gpu);
    expect_close("conv2d_forward", y, kSums);

    Pair dy = random({n, o, ho, wo}), dw = random({o, c, k, k}), db = random({o}),
         dx = outputs({n, c, h, w});
    ops::conv2d_backward_params(x.cpu, dy.cpu, pad, col.cpu, dw.cpu, db.cpu);
    ops::conv2d_backward_params(x.gpu, dy.gpu, pad, col.gpu, dw.gpu, db.gpu);
    expect_close("conv2d dw (accumulated)", dw, kSums);
    expect_close("conv2d db (accumulated)", db, kSums);
    ops::conv2d_backward_input(wt.cpu, dy.cpu, pad, col.cpu, dx.cpu);
    ops::conv2d_backward_input(wt.gpu, dy.gpu, pad, col.gpu, dx.gpu);
    expect_close("conv2d dx", dx, kSums);
  }
}

TEST_F(CudaVsCpu, MaxPoolWithTiesAndFloorMode) {
  for (int trial = 0; trial < 10; ++trial) {
    const int k = static_cast<int>(uniform(1, 3));
    const int64_t n = uniform(1, 3), c = uniform(1, 4), h = uniform(k, 13), w = uniform(k, 13);
    SCOPED_TRACE(str("N=", n, " C=", c, " H=", h, " W=", w, " k=", k));
    std::vector<float> xv = random_values(n * c * h * w, rng_, -3.0f, 0.0f);
    if (trial % 2)
      for (float& v : xv) v = std::floor(v);  // many tied maxima
    Pair x = pair(Tensor::from_vector({n, c, h, w}, xv));
    Pair y = outputs({n, c, h / k, w / k}), dx = outputs({n, c, h, w});
    Pair dy = random({n, c, h / k, w / k});
    ops::maxpool2d_forward(x.cpu, k, y.cpu);
    ops::maxpool2d_forward(x.gpu, k, y.gpu);
    expect_close("maxpool y", y, kExact);
    ops::maxpool2d_backward(x.cpu, dy.cpu, k, dx.cpu);
    ops::maxpool2d_backward(x.gpu, dy.gpu, k, dx.gpu);
    expect_close("maxpool dx", dx, kExact);
  }
}

TEST_F(CudaVsCpu, SoftmaxXentAndCountCorrect) {
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t n = trial == 0 ? 1 : uniform(1, 700), classes = trial == 1 ? 1 : uniform(1, 40);
    const float scale = trial == 2 ? 100.0f : static_cast<float>(uniform(1, 10));
    SCOPED_TRACE(str("N=", n, " classes=", classes, " scale=", scale));
    Pair logits = random({n, classes}, -scale, scale), probs = outputs({n, classes}),
         dl = outputs({n, classes});
    Pair labels = pair(random_labels(n, classes, rng_));
    const float lc = ops::softmax_xent_forward(logits.cpu, labels.cpu, probs.cpu);
    const float lg = ops::softmax_xent_forward(logits.gpu, labels.gpu, probs.gpu);
    EXPECT_NEAR(lg, lc, kSums * std::max(1.0f, std::abs(lc))) << "loss";
    expect_close("probs", probs, kElementwise);
    ops::softmax_xent_backward(probs.cpu, labels.cpu, dl.cpu);
    ops::softmax_xent_backward(probs.gpu, labels.gpu, dl.gpu);
    expect_close("dlogits", dl, kElementwise);
    EXPECT_EQ(ops::count_correct(logits.gpu, labels.gpu),
              ops::count_correct(logits.cpu, labels.cpu));
  }
}

// A bad label is reported with the CPU's message on both devices, for all three label ops.
TEST_F(CudaVsCpu, BadLabelsGiveTheCpuMessage) {
  for (const float bad : {-1.0f, 5.0f, 2.5f, std::nanf("")}) {
    SCOPED_TRACE(bad);
    Pair logits = random({6, 5}), probs = outputs({6, 5});
    Pair labels = pair(Tensor::from_vector({6}, {0, 1, 2, bad, 4, bad}));
    const auto cpu_msg = thrown_message<std::logic_error>(
        [&] { ops::softmax_xent_forward(logits.cpu, labels.cpu, probs.cpu); });
    const auto gpu_msg = thrown_message<std::logic_error>(
        [&] { ops::softmax_xent_forward(logits.gpu, labels.gpu, probs.gpu); });
    EXPECT_NE(gpu_msg.find("at row 3"), std::string::npos) << gpu_msg;
    EXPECT_EQ(gpu_msg.substr(gpu_msg.find("(label")), cpu_msg.substr(cpu_msg.find("(label")));
    EXPECT_THROW(ops::softmax_xent_backward(probs.gpu, labels.gpu, probs.gpu), std::logic_error);
    EXPECT_THROW(ops::count_correct(logits.gpu, labels.gpu), std::logic_error);
  }
}

TEST_F(CudaVsCpu, FusedOptimizerSteps) {
  const int64_t n = 10007;
  Pair p = random({n}), buf = random({n}), m = random({n}), v = random({n}, 0.0f, 1.0f);
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE(str("step ", step));
    Pair g = random({n});
    ops::sgd_update(p.cpu, g.cpu, buf.cpu, 0.05f, 0.9f, 1e-4f, step == 1);
    ops::sgd_update(p.gpu, g.gpu, buf.gpu, 0.05f, 0.9f, 1e-4f, step == 1);
    expect_close("sgd momentum buffer", buf, kElementwise);
    expect_close("sgd param", p, kElementwise);
    ops::sgd_update(p.cpu, g.cpu, buf.cpu, 0.05f, 0.0f, 0.0f, false);  // no momentum: buffer unused
    ops::sgd_update(p.gpu, g.gpu, buf.gpu, 0.05f, 0.0f, 0.0f, false);
    expect_close("sgd param (no momentum)", p, kElementwise);
    ops::adam_update(p.cpu, g.cpu, m.cpu, v.cpu, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, step);
    ops::adam_update(p.gpu, g.gpu, m.gpu, v.gpu, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, step);
    expect_close("adam m", m, kElementwise);
    expect_close("adam v", v, kElementwise);
    expect_close("adam param", p, kElementwise);
  }
}

// A whole model on both devices from the same seed: the loss, every gradient
// and the parameters after an Adam step agree. This is the path a GPU rank runs.
TEST_F(CudaVsCpu, ModelForwardBackwardStep) {
  nn::ModelConfig mlp;
  mlp.width = 64;
  mlp.depth = 2;
  nn::ModelConfig cnn;
  cnn.kind = "cnn";
  cnn.channels = {4, 8};
  cnn.hidden = 32;
  for (const auto& [cfg, sample] : {std::pair{mlp, Shape{100}}, std::pair{cnn, Shape{1, 12, 12}}}) {
    SCOPED_TRACE(cfg.kind);
    auto cpu_model = nn::build_model(cfg, sample), gpu_model = nn::build_model(cfg, sample, gpu_);
    Shape batch_shape = sample;
    batch_shape.insert(batch_shape.begin(), 16);
    Pair x = random(batch_shape), y = pair(random_labels(16, cfg.classes, rng_));
    nn::OptimizerConfig oc;
    oc.name = "adam";
    oc.lr = 1e-3f;
    auto cpu_opt = nn::make_optimizer(oc, cpu_model->parameters());
    auto gpu_opt = nn::make_optimizer(oc, gpu_model->parameters());
    nn::CrossEntropyLoss cpu_loss, gpu_loss;
    const float lc = cpu_loss.forward(cpu_model->forward(x.cpu), y.cpu);
    const float lg = gpu_loss.forward(gpu_model->forward(x.gpu), y.gpu);
    EXPECT_NEAR(lg, lc, kSums * std::abs(lc)) << "loss";
    cpu_model->zero_grad();
    gpu_model->zero_grad();
    cpu_model->backward(cpu_loss.backward());
    gpu_model->backward(gpu_loss.backward());
    const auto cp = cpu_model->parameters(), gp = gpu_model->parameters();
    ASSERT_EQ(cp.size(), gp.size());
    for (std::size_t i = 0; i < cp.size(); ++i)
      expect_close(str("grad of ", cp[i]->name, " #", i), {cp[i]->grad, gp[i]->grad}, kSums);
    cpu_opt->step();
    gpu_opt->step();
    for (std::size_t i = 0; i < cp.size(); ++i)
      expect_close(str("param ", cp[i]->name, " #", i, " after a step"),
                   {cp[i]->value, gp[i]->value}, kSums);
  }
}

// The GPT on both devices from the same seed: the loss, every gradient (the
// tied weight's two contributions included) and the parameters after a
// clipped AdamW step agree.
TEST_F(CudaVsCpu, GptForwardBackwardStep) {
  const nn::ModelConfig cfg{
      .kind = "gpt", .layers = 2, .heads = 2, .embd = 32, .block = 16, .vocab = 11};
  auto cpu_model = nn::build_model(cfg, {16}), gpu_model = nn::build_model(cfg, {16}, gpu_);
  Pair ids = pair(random_labels(4 * 16, 11, rng_).reshape({4, 16}));
  Pair y = pair(random_labels(4 * 16, 11, rng_));
  // A large eps: the key bias's gradient is zero in exact arithmetic (softmax
  // ignores a shift of a whole row) and rounding noise in practice, which
  // Adam's g / (sqrt(v) + eps) would turn into a full step of either sign.
  const nn::OptimizerConfig oc{.name = "adamw", .lr = 1e-3f, .weight_decay = 0.1f, .eps = 1e-3f};
  auto cpu_opt = nn::make_optimizer(oc, cpu_model->parameters());
  auto gpu_opt = nn::make_optimizer(oc, gpu_model->parameters());
  nn::CrossEntropyLoss cpu_loss, gpu_loss;
  const float lc = cpu_loss.forward(cpu_model->forward(ids.cpu), y.cpu);
  const float lg = gpu_loss.forward(gpu_model->forward(ids.gpu), y.gpu);
  EXPECT_NEAR(lg, lc, kSums * std::abs(lc)) << "loss";
  cpu_model->zero_grad();
  gpu_model->zero_grad();
  cpu_model->backward(cpu_loss.backward(), false);
  gpu_model->backward(gpu_loss.backward(), false);
  const auto cp = cpu_model->parameters(), gp = gpu_model->parameters();
  ASSERT_EQ(cp.size(), gp.size());
  for (std::size_t i = 0; i < cp.size(); ++i)
    expect_close(str("grad of ", cp[i]->name), {cp[i]->grad, gp[i]->grad}, kSums);
  EXPECT_NEAR(gpu_opt->clip_grad_norm(0.5f), cpu_opt->clip_grad_norm(0.5f), 1e-4);
  cpu_opt->step();
  gpu_opt->step();
  for (std::size_t i = 0; i < cp.size(); ++i)
    expect_close(str("param ", cp[i]->name, " after a step"), {cp[i]->value, gp[i]->value}, kSums);
}

// Ops return without waiting; a long chain queued on the compute stream is
// still applied in order before a host read. The stream accessor other layers
// use is stable.
TEST_F(CudaVsCpu, OpsAreOrderedOnTheComputeStream) {
#if MDDP_HAVE_CUDA
  void* stream = tensor::cuda::compute_stream(0);
  EXPECT_NE(stream, nullptr);
  EXPECT_EQ(tensor::cuda::compute_stream(0), stream);
#endif
  Pair acc = pair(Tensor::zeros({4096})),
       one = pair(Tensor::from_vector({4096}, std::vector<float>(4096, 1.0f)));
  for (int i = 0; i < 200; ++i) {
    ops::axpy(1.0f, one.gpu, acc.gpu);
    ops::scale(acc.gpu, 1.0f);
  }
  EXPECT_EQ(acc.gpu.to_vector(), std::vector<float>(4096, 200.0f));
#if MDDP_HAVE_CUDA
  tensor::cuda::synchronize(0);
#endif
}

}  // namespace
}  // namespace mddp::test
