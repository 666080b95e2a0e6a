// core/tensor against independent double-precision references: every op is
// recomputed here with plain loops in double and compared element-wise, with
// a rounding-error bound (sums of products) or a small relative tolerance.
// Each op test runs on every device (tests/gpu/devices.h): the CPU, and cuda:0
// where there is a GPU (else SKIPPED). The references and tolerances are the
// same on both: the bounds hold for any summation order (cuBLAS's included,
// as it runs in plain FP32, no TF32), and the GPU's element-wise results
// (fused multiply-add, expf/logf within 2 ulp) are as close as the CPU's.
// tests/gpu/cuda_ops_test.cc compares the two devices directly.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/common/check.h"
#include "core/common/half.h"
#include "core/tensor/ops.h"
#include "core/tensor/tensor.h"
#include "tests/gpu/devices.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

namespace ops = tensor;

// Bound for a float sum of `terms` products whose absolute values sum to `mag`.
double sum_bound(int64_t terms, double mag) {
  return 2.0 * static_cast<double>(terms + 2) * kFloatEps * mag + 1e-30;
}

MDDP_DEVICE_TEST_SUITE(Ops);
MDDP_DEVICE_TEST_SUITE(Gemm);
MDDP_DEVICE_TEST_SUITE(Bias);
MDDP_DEVICE_TEST_SUITE(Relu);
MDDP_DEVICE_TEST_SUITE(Conv2d);
MDDP_DEVICE_TEST_SUITE(MaxPool2d);
MDDP_DEVICE_TEST_SUITE(SoftmaxXent);
MDDP_DEVICE_TEST_SUITE(Mse);
MDDP_DEVICE_TEST_SUITE(Optimizers);
MDDP_DEVICE_TEST_SUITE(Errors);

// ---- tensors ---------------------------------------------------------------

// Views and reshapes alias the same storage; ensure_shape keeps a buffer of the right shape.
TEST(Tensor, ViewsShareStorageAndEnsureShapeReuses) {
  Tensor t = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(ops::numel_of({2, 3, 4}), 24);
  EXPECT_EQ(ops::numel_of({}), 1);
  EXPECT_EQ(ops::numel_of({5, 0}), 0);
  Tensor v = t.view(2, {2, 2});
  EXPECT_TRUE(v.shares_storage(t));
  EXPECT_EQ(v.to_vector(), (std::vector<float>{2, 3, 4, 5}));
  v.data()[0] = 42;
  EXPECT_EQ(t.to_vector()[2], 42);
  EXPECT_EQ(t.reshape({3, 2}).dim(-1), 2);
  EXPECT_THROW(t.view(4, {3}), std::logic_error);  // [4, 7) past 6 elements
  EXPECT_EQ(Tensor::zeros({3}).to_vector(), (std::vector<float>{0, 0, 0}));

  const float* before = t.data();
  ops::ensure_shape(t, {2, 3}, {});
  EXPECT_EQ(t.data(), before);
  ops::ensure_shape(t, {4}, {});
  EXPECT_EQ(t.shape(), (Shape{4}));
}

// The mapping /proc/self/smaps lists around `p`: its length and resident
// bytes, both 0 when none holds p.
std::pair<std::size_t, std::size_t> mapping_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  std::size_t length = 0;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
        line.find(':') > line.find(' ')) {  // a mapping's first line, not "Rss:  12 kB"
      inside = lo <= at && at < hi;
      length = hi - lo;
    } else if (std::size_t kb = 0; inside && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1) {
      return {length, kb * 1024};
    }
  }
  return {0, 0};
}

// Note [Huge pages for large tensors]: a tensor of 2 MiB or more is mapped
// alone, on a 2 MiB boundary, to its length in 4 KiB pages: written whole,
// it holds no more memory than its length, whatever the huge pages.
TEST(Tensor, ALargeTensorIsMappedAloneOnAHugePageBoundaryToItsLength) {
  const int64_t n = (int64_t{5} << 20) / 8 + 1000;  // 2.5 MiB and 4000 bytes
  Tensor t = Tensor::empty({n});
  ops::fill(t, 1.0f);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % (std::size_t{2} << 20), 0u);
  const auto [length, resident] = mapping_of(t.data());
  EXPECT_EQ(length, (bytes + 4095) / 4096 * 4096);
  EXPECT_LE(resident, length);
  EXPECT_GE(resident, bytes / 2);  // written, so mostly resident (a sanity check of the reading)
  EXPECT_EQ(t.to_vector()[static_cast<std::size_t>(n - 1)], 1.0f);
}

// fill, copy, scale and axpy against their one-line definitions.
TEST_P(Ops, FillCopyScaleAxpy) {
  Rng rng(1);
  Tensor x = put(random_tensor({7, 3}, rng)), y = put(random_tensor({21}, rng));
  const auto xv = x.to_vector(), yv = y.to_vector();
  ops::axpy(-0.75f, x, y);
  std::vector<double> want(21);
  for (int i = 0; i < 21; ++i) want[i] = yv[i] + -0.75 * xv[i];
  EXPECT_TRUE(all_close("axpy", want, y.to_vector(), 1e-6, 1e-7));
  ops::scale(x, 3.0f);
  for (int i = 0; i < 21; ++i) want[i] = 3.0 * xv[i];
  EXPECT_TRUE(all_close("scale", want, x.to_vector(), 1e-7, 0));
  ops::copy(x, y);
  EXPECT_EQ(y.to_vector(), x.to_vector());
  ops::fill(y, 2.5f);
  EXPECT_EQ(y.to_vector(), std::vector<float>(21, 2.5f));
}

// The compression hook's rounding, against half.h (itself checked against
// independent references in tests/multirank/kernels_test.cc): ties, both
// overflow limits, fp16 subnormals and underflow, signed zero, inf and NaN.
// On a GPU this compares CUDA's conversion intrinsics with half.h bit for bit.
TEST_P(Ops, RoundToHalfAndWidenMatchHalfH) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.5f,
                          65504.0f,
                          65520.0f,
                          70000.0f,
                          -1e30f,
                          3.4e38f,
                          6.1e-5f,
                          5.96e-8f,
                          2.98e-8f,
                          1e-9f,
                          inf,
                          -inf,
                          std::nanf(""),
                          1.0f + 1.0f / 2048,  // fp16 tie between 1 and 1+2^-10: to even (1)
                          1.0f + 3.0f / 2048,  // fp16 tie: to even (1+2^-9)
                          1.0f + 1.0f / 256,   // bf16 tie: to even (1)
                          1.0f + 3.0f / 256};  // bf16 tie: to even (1+2^-6)
  Rng rng(7);
  for (int i = 0; i < 1000; ++i)
    x.push_back(static_cast<float>(rng.normal()) * std::ldexp(1.0f, i % 40 - 20));
  const int64_t n = static_cast<int64_t>(x.size());  // even: the 16-bit buffer is n/2 floats
  ASSERT_EQ(n % 2, 0);
  Tensor src = put(Tensor::from_vector({n}, x)), back = put(Tensor::zeros({n}));
  for (HalfFormat f : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    const bool fp16 = f == HalfFormat::kFp16;
    SCOPED_TRACE(fp16 ? "fp16" : "bf16");
    Tensor wire = put(Tensor::zeros({n / 2}));  // n 16-bit values on the device under test
    ops::round_to_half(src, f, reinterpret_cast<uint16_t*>(wire.data()));
    ops::widen_from_half(reinterpret_cast<const uint16_t*>(wire.data()), f, back);
    std::vector<uint16_t> bits(n);
    std::memcpy(bits.data(), wire.to_vector().data(), bits.size() * sizeof(uint16_t));
    const std::vector<float> widened = back.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = fp16 ? float_to_fp16(x[i]) : float_to_bf16(x[i]);
      const float want_back = fp16 ? fp16_to_float(want) : bf16_to_float(want);
      if (std::isnan(x[i])) {  // NaN stays NaN (payload bits may differ between devices)
        EXPECT_TRUE(std::isnan(widened[i])) << i;
        continue;
      }
      ASSERT_EQ(bits[i], want) << "x[" << i << "] = " << x[i];
      ASSERT_EQ(std::memcmp(&widened[i], &want_back, sizeof(float)), 0)
          << "x[" << i << "] = " << x[i];
    }
  }
}

// ---- gemm ------------------------------------------------------------------

struct GemmCase {
  int64_t m, n, k;
};

// c = alpha * op(a) op(b) + beta * c0 in double, with a per-element rounding bound.
void gemm_ref(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
              const std::vector<float>& a, const std::vector<float>& b, double beta,
              const std::vector<float>& c0, std::vector<double>& c, std::vector<double>& bound) {
  c.assign(static_cast<std::size_t>(m * n), 0.0);
  bound.assign(c.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        s += av * bv;
        mag += std::abs(av * bv);
      }
      const double c_old = beta == 0.0 ? 0.0 : beta * c0[i * n + j];
      c[i * n + j] = alpha * s + c_old;
      bound[i * n + j] = sum_bound(k + 1, std::abs(alpha) * mag + std::abs(c_old));
    }
}

// gemm matches a naive double triple loop for all transposes, odd shapes and alpha/beta.
// The shapes with a side over 384 go to the other CPU library on AVX2-only
// CPUs (core/tensor/cpu/gemm.cc), so both libraries are checked there.
TEST_P(Gemm, MatchesNaiveReferenceAllTransposes) {
  const GemmCase cases[] = {{1, 1, 1}, {3, 5, 7},   {17, 1, 33}, {64, 130, 31},
                            {2, 9, 1}, {3, 400, 5}, {390, 2, 17}};
  const std::pair<float, float> scalars[] = {
      {1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}, {0.0f, 2.0f}};
  Rng rng(7);
  for (const GemmCase& g : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (auto [alpha, beta] : scalars) {
          SCOPED_TRACE(str("m=", g.m, " n=", g.n, " k=", g.k, " ta=", ta, " tb=", tb,
                           " alpha=", alpha, " beta=", beta));
          Tensor a = put(random_tensor(ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, rng));
          Tensor b = put(random_tensor(tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, rng));
          Tensor c = put(random_tensor({g.m, g.n}, rng));
          const auto c0 = c.to_vector();
          ops::gemm(ta, tb, alpha, a, b, beta, c);
          std::vector<double> want, bound;
          gemm_ref(ta, tb, g.m, g.n, g.k, alpha, a.to_vector(), b.to_vector(), beta, c0, want,
                   bound);
          EXPECT_TRUE(all_within("gemm", want, bound, c.to_vector()));
        }
}

// k = 0: the product is empty, so c = beta * c (and exactly 0 for beta = 0).
TEST_P(Gemm, EmptyInnerDimensionScalesC) {
  Tensor a = Tensor::empty({4, 0}, device()), b = Tensor::empty({0, 3}, device());
  Tensor c = Tensor::from_vector({4, 3}, std::vector<float>(12, 2.0f), device());
  ops::gemm(false, false, 1.0f, a, b, 0.5f, c);
  EXPECT_EQ(c.to_vector(), std::vector<float>(12, 1.0f));
  Tensor at = Tensor::empty({0, 4}, device());
  ops::gemm(true, false, 3.0f, at, b, 0.0f, c);
  EXPECT_EQ(c.to_vector(), std::vector<float>(12, 0.0f));
}

// beta = 0 must ignore c's old contents (BLAS rule): outputs come from Tensor::empty,
// whose memory may hold NaN bit patterns.
TEST_P(Gemm, BetaZeroIgnoresGarbageInC) {
  Rng rng(3);
  Tensor a = put(random_tensor({5, 4}, rng)), b = put(random_tensor({4, 6}, rng));
  Tensor c = Tensor::from_vector({5, 6}, std::vector<float>(30, std::nanf("")), device());
  ops::gemm(false, false, 1.0f, a, b, 0.0f, c);
  std::vector<double> want, bound;
  gemm_ref(false, false, 5, 6, 4, 1.0, a.to_vector(), b.to_vector(), 0.0,
           std::vector<float>(30, 0.0f), want, bound);
  EXPECT_TRUE(all_within("gemm beta=0", want, bound, c.to_vector()));
}

// gemm gives the same answer with 1 and 2 compute threads (within rounding).
TEST(GemmCpu, ThreadCountDoesNotChangeResult) {
  Rng rng(11);
  Tensor a = random_tensor({64, 96}, rng), b = random_tensor({96, 80}, rng);
  Tensor c1 = Tensor::zeros({64, 80}), c2 = Tensor::zeros({64, 80});
  const int saved = ops::num_threads();
  ops::set_num_threads(1);
  ops::gemm(false, false, 1.0f, a, b, 0.0f, c1);
  ops::set_num_threads(2);
  ops::gemm(false, false, 1.0f, a, b, 0.0f, c2);
  ops::set_num_threads(saved);
  std::vector<double> want, bound;
  gemm_ref(false, false, 64, 80, 96, 1.0, a.to_vector(), b.to_vector(), 0.0,
           std::vector<float>(64 * 80, 0.0f), want, bound);
  EXPECT_TRUE(all_within("gemm 1 thread", want, bound, c1.to_vector()));
  EXPECT_TRUE(all_within("gemm 2 threads", want, bound, c2.to_vector()));
}

// Note [OpenBLAS's idle threads]: with one compute thread OpenBLAS's thread
// pool is stopped (its threads would spin at every process start), also
// after more threads were asked for and served a GEMM. OpenBLAS's own flag
// says whether its pool runs (absent from a BLAS without threads).
extern "C" __attribute__((weak)) int blas_server_avail;
TEST(GemmCpu, OneComputeThreadStopsOpenBlasThreads) {
  if (&blas_server_avail == nullptr) GTEST_SKIP() << "this BLAS has no thread pool";
  Rng rng(12);
  Tensor a = random_tensor({512, 512}, rng), c = Tensor::zeros({512, 512});
  const int saved = ops::num_threads();
  ops::set_num_threads(1);
  EXPECT_EQ(blas_server_avail, 0);
  ops::set_num_threads(2);
  ops::gemm(false, false, 1.0f, a, a, 0.0f, c);
  ops::set_num_threads(1);
  EXPECT_EQ(blas_server_avail, 0);
  ops::set_num_threads(saved);
}

// ---- bias, relu ------------------------------------------------------------

// bias_add adds b[c] at every (n, h, w); bias_grad accumulates sums of dy into dbias.
TEST_P(Bias, AddAndGradMatchReference) {
  Rng rng(5);
  for (const Shape& shape : {Shape{1, 1}, Shape{5, 3}, Shape{3, 4, 5, 7}, Shape{1, 2, 1, 1}}) {
    SCOPED_TRACE(ops::shape_str(shape));
    const int64_t n = shape[0], c = shape[1], inner = ops::numel_of(shape) / (n * c);
    Tensor y = put(random_tensor(shape, rng)), bias = put(random_tensor({c}, rng));
    const auto y0 = y.to_vector(), bv = bias.to_vector();
    ops::bias_add(y, bias);
    std::vector<double> want(y0.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t p = 0; p < inner; ++p) {
          const int64_t idx = (i * c + j) * inner + p;
          want[idx] = static_cast<double>(y0[idx]) + bv[j];
        }
    EXPECT_TRUE(all_close("bias_add", want, y.to_vector(), 1e-7, 1e-7));

    Tensor dy = put(random_tensor(shape, rng)), db = put(random_tensor({c}, rng));
    const auto dyv = dy.to_vector(), db0 = db.to_vector();
    ops::bias_grad(dy, db);
    std::vector<double> gwant(db0.begin(), db0.end()), gbound(c);
    for (int64_t j = 0; j < c; ++j) {
      double mag = std::abs(db0[j]);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < inner; ++p) {
          gwant[j] += dyv[(i * c + j) * inner + p];
          mag += std::abs(dyv[(i * c + j) * inner + p]);
        }
      gbound[j] = sum_bound(n * inner + 1, mag);
    }
    EXPECT_TRUE(all_within("bias_grad (accumulates)", gwant, gbound, db.to_vector()));
  }
}

// relu forward is max(x, 0); backward passes dy where the output is positive.
TEST_P(Relu, ForwardBackwardMatchDefinition) {
  std::vector<float> xv = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.5f, -1e-30f, 7.0f};
  Tensor x = Tensor::from_vector({7}, xv, device()), y = Tensor::empty({7}, device());
  ops::relu_forward(x, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 0, 0, 1e-30f, 3.5f, 0, 7}));
  Tensor dy = Tensor::from_vector({7}, {1, 2, 3, 4, 5, 6, 7}, device()),
         dx = Tensor::empty({7}, device());
  ops::relu_backward(y, dy, dx);
  EXPECT_EQ(dx.to_vector(), (std::vector<float>{0, 0, 0, 4, 5, 0, 7}));
}

// ---- conv2d ----------------------------------------------------------------

struct ConvCase {
  int64_t n, c, h, w, o, k;
  int pad;
  std::string name() const {
    return str("N=", n, " C=", c, " H=", h, " W=", w, " O=", o, " K=", k, " pad=", pad);
  }
};

int64_t out_size(int64_t in, int64_t k, int pad) {
  return in + 2 * pad - k + 1;
}

// Input pixel (iy, ix) of image n, channel c, or 0 in the zero padding.
double pixel(const std::vector<float>& x, const ConvCase& d, int64_t n, int64_t c, int64_t iy,
             int64_t ix) {
  if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) return 0.0;
  return x[((n * d.c + c) * d.h + iy) * d.w + ix];
}

// Each case: odd sizes, padding 0 / same / wider than k/2, C > 1, O > 1, N > 1.
const ConvCase kConvCases[] = {{1, 1, 1, 1, 1, 1, 0}, {1, 1, 5, 5, 1, 3, 1}, {2, 3, 5, 7, 4, 3, 1},
                               {3, 2, 6, 5, 1, 3, 0}, {1, 2, 4, 4, 2, 5, 2}, {2, 2, 3, 3, 3, 3, 2},
                               {1, 3, 7, 3, 2, 1, 0}};

// conv2d_forward matches a direct 7-loop convolution in double.
TEST_P(Conv2d, ForwardMatchesDirectConvolution) {
  Rng rng(21);
  for (const ConvCase& d : kConvCases) {
    SCOPED_TRACE(d.name());
    const int64_t ho = out_size(d.h, d.k, d.pad), wo = out_size(d.w, d.k, d.pad);
    Tensor x = put(random_tensor({d.n, d.c, d.h, d.w}, rng));
    Tensor w = put(random_tensor({d.o, d.c, d.k, d.k}, rng)), b = put(random_tensor({d.o}, rng));
    Tensor col = Tensor::empty({d.c * d.k * d.k, ho * wo}, device());
    Tensor y = Tensor::from_vector(
        {d.n, d.o, ho, wo}, std::vector<float>(d.n * d.o * ho * wo, std::nanf("")), device());
    ops::conv2d_forward(x, w, b, d.pad, col, y);

    const auto xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    std::vector<double> want(y.numel()), bound(y.numel());
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t o = 0; o < d.o; ++o)
        for (int64_t oy = 0; oy < ho; ++oy)
          for (int64_t ox = 0; ox < wo; ++ox) {
            double s = bv[o], mag = std::abs(bv[o]);
            for (int64_t c = 0; c < d.c; ++c)
              for (int64_t ky = 0; ky < d.k; ++ky)
                for (int64_t kx = 0; kx < d.k; ++kx) {
                  const double t = wv[((o * d.c + c) * d.k + ky) * d.k + kx] *
                                   pixel(xv, d, n, c, oy + ky - d.pad, ox + kx - d.pad);
                  s += t;
                  mag += std::abs(t);
                }
            const int64_t idx = ((n * d.o + o) * ho + oy) * wo + ox;
            want[idx] = s;
            bound[idx] = sum_bound(d.c * d.k * d.k + 1, mag);
          }
    EXPECT_TRUE(all_within("conv2d_forward", want, bound, y.to_vector()));
  }
}

// conv2d backward (params accumulate, input overwrites) matches direct double sums.
TEST_P(Conv2d, BackwardMatchesDirectSums) {
  Rng rng(22);
  for (const ConvCase& d : kConvCases) {
    SCOPED_TRACE(d.name());
    const int64_t ho = out_size(d.h, d.k, d.pad), wo = out_size(d.w, d.k, d.pad);
    Tensor x = put(random_tensor({d.n, d.c, d.h, d.w}, rng));
    Tensor w = put(random_tensor({d.o, d.c, d.k, d.k}, rng));
    Tensor dy = put(random_tensor({d.n, d.o, ho, wo}, rng));
    Tensor dw = put(random_tensor(w.shape(), rng)), db = put(random_tensor({d.o}, rng));
    Tensor dx = Tensor::from_vector(x.shape(), std::vector<float>(x.numel(), 9.0f), device());
    Tensor col = Tensor::empty({d.c * d.k * d.k, ho * wo}, device());
    const auto xv = x.to_vector(), wv = w.to_vector(), dyv = dy.to_vector();
    const auto dw0 = dw.to_vector(), db0 = db.to_vector();
    ops::conv2d_backward_params(x, dy, d.pad, col, dw, db);
    ops::conv2d_backward_input(w, dy, d.pad, col, dx);

    auto dy_at = [&](int64_t n, int64_t o, int64_t oy, int64_t ox) {
      return static_cast<double>(dyv[((n * d.o + o) * ho + oy) * wo + ox]);
    };
    // dW[o, c, ky, kx] = dW0 + sum_{n, oy, ox} dy[n, o, oy, ox] x[n, c, oy + ky - p, ox + kx - p]
    std::vector<double> dw_want(dw0.begin(), dw0.end()), dw_bound(dw0.size());
    for (int64_t o = 0; o < d.o; ++o)
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t ky = 0; ky < d.k; ++ky)
          for (int64_t kx = 0; kx < d.k; ++kx) {
            const int64_t idx = ((o * d.c + c) * d.k + ky) * d.k + kx;
            double mag = std::abs(dw0[idx]);
            for (int64_t n = 0; n < d.n; ++n)
              for (int64_t oy = 0; oy < ho; ++oy)
                for (int64_t ox = 0; ox < wo; ++ox) {
                  const double t =
                      dy_at(n, o, oy, ox) * pixel(xv, d, n, c, oy + ky - d.pad, ox + kx - d.pad);
                  dw_want[idx] += t;
                  mag += std::abs(t);
                }
            dw_bound[idx] = sum_bound(d.n * ho * wo + 1, mag);
          }
    EXPECT_TRUE(all_within("conv dW", dw_want, dw_bound, dw.to_vector()));

    std::vector<double> db_want(db0.begin(), db0.end()), db_bound(d.o);
    for (int64_t o = 0; o < d.o; ++o) {
      double mag = std::abs(db0[o]);
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t p = 0; p < ho * wo; ++p) {
          db_want[o] += dy_at(n, o, 0, p);
          mag += std::abs(dy_at(n, o, 0, p));
        }
      db_bound[o] = sum_bound(d.n * ho * wo + 1, mag);
    }
    EXPECT_TRUE(all_within("conv db", db_want, db_bound, db.to_vector()));

    // dx[n, c, iy, ix] = sum over (o, ky, kx) with oy = iy - ky + p, ox = ix - kx + p in range.
    std::vector<double> dx_want(x.numel(), 0.0), dx_bound(x.numel());
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t iy = 0; iy < d.h; ++iy)
          for (int64_t ix = 0; ix < d.w; ++ix) {
            double s = 0.0, mag = 0.0;
            for (int64_t o = 0; o < d.o; ++o)
              for (int64_t ky = 0; ky < d.k; ++ky)
                for (int64_t kx = 0; kx < d.k; ++kx) {
                  const int64_t oy = iy - ky + d.pad, ox = ix - kx + d.pad;
                  if (oy < 0 || oy >= ho || ox < 0 || ox >= wo) continue;
                  const double t = wv[((o * d.c + c) * d.k + ky) * d.k + kx] * dy_at(n, o, oy, ox);
                  s += t;
                  mag += std::abs(t);
                }
            const int64_t idx = ((n * d.c + c) * d.h + iy) * d.w + ix;
            dx_want[idx] = s;
            dx_bound[idx] = sum_bound(d.o * d.k * d.k, mag);
          }
    EXPECT_TRUE(all_within("conv dx (overwritten)", dx_want, dx_bound, dx.to_vector()));
  }
}

// ---- maxpool ---------------------------------------------------------------

struct PoolCase {
  int64_t n, c, h, w;
  int k;
};

// maxpool forward/backward match a direct reference, including ties (first maximum in
// row-major window order gets the gradient) and floor mode (leftover rows/cols get 0).
TEST_P(MaxPool2d, ForwardBackwardMatchReferenceWithTies) {
  const PoolCase cases[] = {
      {1, 1, 2, 2, 2}, {2, 3, 5, 7, 2}, {1, 2, 6, 6, 3}, {1, 1, 3, 3, 1}, {2, 1, 4, 9, 4}};
  Rng rng(31);
  for (const PoolCase& d : cases)
    for (bool ties : {false, true}) {
      SCOPED_TRACE(str("N=", d.n, " C=", d.c, " H=", d.h, " W=", d.w, " k=", d.k, " ties=", ties));
      const int64_t ho = d.h / d.k, wo = d.w / d.k, plane = d.h * d.w;
      std::vector<float> xv = random_values(d.n * d.c * plane, rng, -3.0f, -1.0f);
      // With ties: values in {-3, -2, -1}, so most windows hold repeated maxima.
      if (ties)
        for (float& v : xv) v = std::floor(v);
      Tensor x = Tensor::from_vector({d.n, d.c, d.h, d.w}, xv, device());
      Tensor y = Tensor::empty({d.n, d.c, ho, wo}, device());
      ops::maxpool2d_forward(x, d.k, y);
      Tensor dy = put(random_tensor(y.shape(), rng, 0.5f, 1.5f));
      Tensor dx = Tensor::from_vector(x.shape(), std::vector<float>(x.numel(), 9.0f), device());
      ops::maxpool2d_backward(x, dy, d.k, dx);

      std::vector<double> y_want(y.numel()), dx_want(x.numel(), 0.0);
      const auto dyv = dy.to_vector();
      for (int64_t p = 0; p < d.n * d.c; ++p)
        for (int64_t oy = 0; oy < ho; ++oy)
          for (int64_t ox = 0; ox < wo; ++ox) {
            int64_t best = -1;
            for (int64_t a = 0; a < d.k; ++a)
              for (int64_t b = 0; b < d.k; ++b) {
                const int64_t idx = p * plane + (oy * d.k + a) * d.w + ox * d.k + b;
                if (best < 0 || xv[idx] > xv[best]) best = idx;
              }
            const int64_t o = (p * ho + oy) * wo + ox;
            y_want[o] = xv[best];
            dx_want[best] += dyv[o];
          }
      EXPECT_TRUE(all_close("maxpool y", y_want, y.to_vector(), 0, 0));
      EXPECT_TRUE(all_close("maxpool dx", dx_want, dx.to_vector(), 0, 0));
    }
}

// ---- losses ----------------------------------------------------------------

// softmax-xent forward (loss and probabilities) and backward match double formulas,
// including huge logits where a naive exp would overflow.
TEST_P(SoftmaxXent, MatchesDoubleFormulas) {
  struct Case {
    int64_t n, classes;
    float scale;
  };
  Rng rng(41);
  for (const Case& cs : {Case{1, 1, 1}, Case{1, 5, 1}, Case{7, 3, 2}, Case{4, 10, 100}}) {
    SCOPED_TRACE(str("N=", cs.n, " classes=", cs.classes, " scale=", cs.scale));
    Tensor logits = put(random_tensor({cs.n, cs.classes}, rng, -cs.scale, cs.scale));
    Tensor labels = put(random_labels(cs.n, cs.classes, rng));
    Tensor probs = Tensor::empty(logits.shape(), device()),
           dlogits = Tensor::empty(logits.shape(), device());
    const float loss = ops::softmax_xent_forward(logits, labels, probs);
    ops::softmax_xent_backward(probs, labels, dlogits);

    const auto lv = logits.to_vector(), yv = labels.to_vector();
    const double want_loss = xent_ref(lv, yv, cs.n, cs.classes);
    EXPECT_NEAR(loss, want_loss, 1e-6 * std::max(1.0, std::abs(want_loss)));
    std::vector<double> p_want(lv.size()), d_want(lv.size());
    for (int64_t i = 0; i < cs.n; ++i) {
      double mx = lv[i * cs.classes], sum = 0.0;
      for (int64_t j = 0; j < cs.classes; ++j) mx = std::max(mx, double{lv[i * cs.classes + j]});
      for (int64_t j = 0; j < cs.classes; ++j) sum += std::exp(lv[i * cs.classes + j] - mx);
      for (int64_t j = 0; j < cs.classes; ++j) {
        const int64_t idx = i * cs.classes + j;
        p_want[idx] = std::exp(lv[idx] - mx) / sum;
        d_want[idx] = (p_want[idx] - (j == static_cast<int64_t>(yv[i]) ? 1.0 : 0.0)) / cs.n;
      }
    }
    EXPECT_TRUE(all_close("probs", p_want, probs.to_vector(), 1e-5, 1e-6, true));
    EXPECT_TRUE(all_close("dlogits", d_want, dlogits.to_vector(), 1e-5, 1e-6, true));
  }
}

// count_correct counts rows whose first arg-max equals the label (ties go to the lower index).
TEST_P(SoftmaxXent, CountCorrectUsesFirstArgMax) {
  Tensor logits = Tensor::from_vector({4, 3},
                                      {1, 3, 3,   // tie: class 1 wins, not 2
                                       3, 3, 0,   // tie: class 0 wins, not 1
                                       5, -1, 0,  // plain maximum
                                       -2, -1, -3},
                                      device());
  Tensor labels = Tensor::from_vector({4}, {1, 0, 0, 2}, device());
  EXPECT_EQ(ops::count_correct(logits, labels), 3);  // last-max would count 1
  Rng rng(42);
  Tensor big = put(random_tensor({50, 7}, rng)), big_labels = put(random_labels(50, 7, rng));
  const auto lv = big.to_vector(), yv = big_labels.to_vector();
  int64_t want = 0;
  for (int64_t i = 0; i < 50; ++i) {
    int64_t arg = 0;
    for (int64_t j = 1; j < 7; ++j)
      if (lv[i * 7 + j] > lv[i * 7 + arg]) arg = j;
    want += arg == static_cast<int64_t>(yv[i]);
  }
  EXPECT_EQ(ops::count_correct(big, big_labels), want);
}

// mse forward is mean (p - t)^2 and backward 2 (p - t) / numel, like torch.nn.MSELoss.
TEST_P(Mse, MatchesDoubleFormulas) {
  Rng rng(43);
  for (const Shape& shape : {Shape{1}, Shape{1, 1}, Shape{5, 3}, Shape{2, 3, 3, 5}}) {
    SCOPED_TRACE(ops::shape_str(shape));
    Tensor p = put(random_tensor(shape, rng, -2, 2)), t = put(random_tensor(shape, rng, -2, 2));
    Tensor dp = Tensor::empty(shape, device());
    const float loss = ops::mse_forward(p, t);
    ops::mse_backward(p, t, dp);
    const auto pv = p.to_vector(), tv = t.to_vector();
    const double want = mse_ref(pv, tv);
    EXPECT_NEAR(loss, want, 1e-6 * want);
    std::vector<double> g(pv.size());
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = 2.0 * (static_cast<double>(pv[i]) - tv[i]) / static_cast<double>(pv.size());
    EXPECT_TRUE(all_close("dpred", g, dp.to_vector(), 1e-6, 1e-7));
  }
}

// ---- errors ----------------------------------------------------------------

// Every op refuses mismatched shapes with an exception instead of reading out of bounds.
TEST_P(Errors, MismatchedShapesThrow) {
  const auto zeros = [&](const Shape& shape) { return Tensor::zeros(shape, device()); };
  Tensor a = zeros({3, 4}), b = zeros({5, 2}), c = zeros({3, 2});
  EXPECT_THROW(ops::gemm(false, false, 1, a, b, 0, c), std::logic_error);  // inner 4 vs 5
  Tensor b2 = zeros({4, 2}), c_bad = zeros({2, 3});
  EXPECT_THROW(ops::gemm(false, false, 1, a, b2, 0, c_bad), std::logic_error);
  Tensor v = zeros({4});
  EXPECT_THROW(ops::gemm(false, false, 1, a, v, 0, c), std::logic_error);  // not 2-D
  EXPECT_THROW(ops::bias_add(c, zeros({3})), std::logic_error);
  Tensor db = zeros({4});
  EXPECT_THROW(ops::bias_grad(c, db), std::logic_error);
  EXPECT_THROW(ops::relu_forward(a, c), std::logic_error);
  EXPECT_THROW(ops::axpy(1, a, c), std::logic_error);
  EXPECT_THROW(ops::copy(a, c), std::logic_error);

  Tensor x = zeros({1, 2, 5, 5}), w = zeros({3, 1, 3, 3}), bias = zeros({3});
  Tensor col = zeros({18, 25}), y = zeros({1, 3, 5, 5});
  EXPECT_THROW(ops::conv2d_forward(x, w, bias, 1, col, y), std::logic_error);  // C 2 vs 1
  Tensor w2 = zeros({3, 2, 3, 3}), y_bad = zeros({1, 3, 4, 4});
  EXPECT_THROW(ops::conv2d_forward(x, w2, bias, 1, col, y_bad), std::logic_error);
  Tensor small_col = zeros({1, 1});
  EXPECT_THROW(ops::conv2d_forward(x, w2, bias, 1, small_col, y), std::logic_error);
  Tensor w_big = zeros({3, 2, 7, 7});
  EXPECT_THROW(ops::conv2d_forward(x, w_big, bias, 0, col, y), std::logic_error);
  Tensor pooled = zeros({1, 2, 3, 3});
  EXPECT_THROW(ops::maxpool2d_forward(x, 2, pooled), std::logic_error);  // 5/2 = 2, not 3

  Tensor logits = zeros({3, 4}), probs = zeros({3, 4});
  EXPECT_THROW(ops::softmax_xent_forward(logits, zeros({2}), probs), std::logic_error);
  Tensor probs_bad = zeros({3, 3});
  EXPECT_THROW(ops::softmax_xent_forward(logits, zeros({3}), probs_bad), std::logic_error);
  EXPECT_THROW(ops::mse_forward(a, c), std::logic_error);
}

// Labels must be integral class indices in [0, classes): anything else throws, naming the row.
TEST_P(Errors, LabelOutsideClassesThrows) {
  Tensor logits = Tensor::zeros({2, 4}, device()), probs = Tensor::zeros({2, 4}, device());
  for (float bad :
       {-1.0f, 4.0f, 100.0f, 1.5f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    Tensor labels = Tensor::from_vector({2}, {0.0f, bad}, device());
    const std::string msg =
        thrown_message<std::logic_error>([&] { ops::softmax_xent_forward(logits, labels, probs); });
    EXPECT_NE(msg.find("at row 1"), std::string::npos) << msg;
    EXPECT_THROW(ops::softmax_xent_backward(probs, labels, probs), std::logic_error);
    EXPECT_THROW(ops::count_correct(logits, labels), std::logic_error);
  }
  Tensor ok = Tensor::from_vector({2}, {0.0f, 3.0f}, device());
  EXPECT_NO_THROW(ops::softmax_xent_forward(logits, ok, probs));
}

// A CUDA device on a machine (or build) without a GPU is refused with a clear
// InputError; with a GPU, an op given tensors on two devices refuses by name.
TEST(CudaAvailability, WithoutGpuIsAClearError) {
  EXPECT_THROW(tensor::Device::parse("gpu"), InputError);
  EXPECT_THROW(tensor::Device::parse("cuda:x"), InputError);
  const tensor::Device dev = tensor::Device::parse("cuda:0");
  EXPECT_TRUE(dev.is_cuda());
  EXPECT_EQ(dev.str(), "cuda:0");
  if (tensor::cuda_device_count() == 0) {
    const std::string msg = thrown_message<InputError>([&] { tensor::require_available(dev); });
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
    EXPECT_THROW(Tensor::empty({2, 2}, dev), InputError);
    EXPECT_THROW(Tensor::zeros({2, 2}, dev), InputError);
  } else {
    Tensor g = Tensor::zeros({2, 2}, dev);
    Tensor h = Tensor::zeros({2, 2});
    const std::string msg = thrown_message<Error>([&] { ops::gemm(false, false, 1, g, h, 0, h); });
    EXPECT_NE(msg.find("gemm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  }
  EXPECT_THROW(tensor::require_available(tensor::Device::parse("cuda:99")), InputError);
}

// ---- optimisers ------------------------------------------------------------

// One fused SGD step (with and without momentum, first and later steps) and
// one Adam step match PyTorch's formulas written out in double.
TEST_P(Optimizers, SgdAndAdamMatchDoubleFormulas) {
  Rng rng(51);
  const int64_t n = 37;
  const float lr = 0.1f, wd = 0.01f;
  for (const float momentum : {0.0f, 0.9f})
    for (const bool first : {true, false}) {
      SCOPED_TRACE(str("sgd momentum=", momentum, " first_step=", first));
      Tensor p = put(random_tensor({n}, rng)), g = put(random_tensor({n}, rng)),
             buf = put(random_tensor({n}, rng));
      const auto p0 = p.to_vector(), gv = g.to_vector(), b0 = buf.to_vector();
      ops::sgd_update(p, g, buf, lr, momentum, wd, first);
      std::vector<double> p_want(n), b_want(n);
      for (int64_t i = 0; i < n; ++i) {
        const double gi = gv[i] + double{wd} * p0[i];
        b_want[i] = momentum == 0.0f ? b0[i] : first ? gi : double{momentum} * b0[i] + gi;
        p_want[i] = p0[i] - double{lr} * (momentum == 0.0f ? gi : b_want[i]);
      }
      EXPECT_TRUE(all_close("sgd param", p_want, p.to_vector(), 1e-5, 1e-6));
      EXPECT_TRUE(all_close("sgd momentum buffer", b_want, buf.to_vector(), 1e-5, 1e-6));
    }
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const int64_t step = 3;
  Tensor p = put(random_tensor({n}, rng)), g = put(random_tensor({n}, rng));
  Tensor m = put(random_tensor({n}, rng)), v = put(random_tensor({n}, rng, 0.0f, 1.0f));
  const auto p0 = p.to_vector(), gv = g.to_vector(), m0 = m.to_vector(), v0 = v.to_vector();
  ops::adam_update(p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, wd, step);
  std::vector<double> p_want(n), m_want(n), v_want(n);
  for (int64_t i = 0; i < n; ++i) {
    const double gi = gv[i] + double{wd} * p0[i];
    m_want[i] = b1 * m0[i] + (1 - b1) * gi;
    v_want[i] = b2 * v0[i] + (1 - b2) * gi * gi;
    const double m_hat = m_want[i] / (1 - std::pow(b1, step)),
                 v_hat = v_want[i] / (1 - std::pow(b2, step));
    p_want[i] = p0[i] - 1e-3 * m_hat / (std::sqrt(v_hat) + eps);
  }
  EXPECT_TRUE(all_close("adam m", m_want, m.to_vector(), 1e-5, 1e-6));
  EXPECT_TRUE(all_close("adam v", v_want, v.to_vector(), 1e-5, 1e-6));
  EXPECT_TRUE(all_close("adam param", p_want, p.to_vector(), 1e-5, 1e-6));
}

// The CPU's Adam and AdamW loops are vectorised (and cloned for AVX2): the
// whole array in one call, whose body runs several elements per
// instruction, gives the same bits as a call per element, which runs only
// the scalar remainder. Element-wise arithmetic with no reassociation and
// a correctly rounded sqrt cannot differ; this holds the build to that.
TEST(AdamCpu, VectorisedLoopGivesTheBitsOfOneElementAtATime) {
  Rng rng(53);
  const int64_t n = 1003;  // a vector body and a remainder at any width
  const Tensor g = random_tensor({n}, rng), p0 = random_tensor({n}, rng),
               m0 = random_tensor({n}, rng), v0 = random_tensor({n}, rng, 0.0f, 1.0f);
  for (const bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "adamw" : "adam");
    const auto update = [&](Tensor& p, const Tensor& gi, Tensor& m, Tensor& v) {
      if (decoupled)
        ops::adamw_update(p, gi, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 7);
      else
        ops::adam_update(p, gi, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 7);
    };
    const auto copy = [&](const Tensor& t) { return Tensor::from_vector({n}, t.to_vector()); };
    Tensor p = copy(p0), m = copy(m0), v = copy(v0);
    update(p, g, m, v);
    Tensor p1 = copy(p0), m1 = copy(m0), v1 = copy(v0);
    for (int64_t i = 0; i < n; ++i) {
      Tensor pi = p1.view(i, {1}), mi = m1.view(i, {1}), vi = v1.view(i, {1});
      update(pi, g.view(i, {1}), mi, vi);
    }
    EXPECT_TRUE(bitwise_equal(p.to_vector(), p1.to_vector()));
    EXPECT_TRUE(bitwise_equal(m.to_vector(), m1.to_vector()));
    EXPECT_TRUE(bitwise_equal(v.to_vector(), v1.to_vector()));
  }
}

// ---- transfers -------------------------------------------------------------

// Tensor::to and ops::copy move values between the host and the device exactly,
// and copy within the device is exact too.
TEST_P(Ops, TransfersAreExact) {
  Rng rng(61);
  const Tensor host = random_tensor({5, 7}, rng);
  Tensor on_dev = host.to(device());
  EXPECT_EQ(on_dev.device(), device());
  EXPECT_TRUE(bitwise_equal(on_dev.to_vector(), host.to_vector()));
  Tensor dev_copy = Tensor::empty({35}, device());
  ops::copy(on_dev, dev_copy);  // same device
  Tensor back = Tensor::empty({7, 5});
  ops::copy(dev_copy, back);  // to the host
  EXPECT_TRUE(bitwise_equal(back.to_vector(), host.to_vector()));
  Tensor view = on_dev.view(7, {2, 7});  // rows 1..2, through a window
  const std::vector<float> hv = host.to_vector();
  EXPECT_EQ(view.to(tensor::Device{}).to_vector(),
            std::vector<float>(hv.begin() + 7, hv.begin() + 21));
}

}  // namespace
}  // namespace mddp::test
