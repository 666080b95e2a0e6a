// The GPT's ops (core/tensor/ops.h "the GPT's ops") against independent
// references, on every device (tests/gpu/devices.h), like tensor_ops_test.cc:
// forwards against the formulas written out in double; backwards against
// central differences of those double formulas (eps 1e-4 in double, so the
// difference is exact to ~1e-8 and the tolerance measures the float op).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "core/common/check.h"
#include "core/tensor/ops.h"
#include "tests/gpu/devices.h"
#include "tests/unit/gradcheck.h"

namespace mddp::test {
namespace {

namespace ops = tensor;

MDDP_DEVICE_TEST_SUITE(GemmBatched);
MDDP_DEVICE_TEST_SUITE(Embedding);
MDDP_DEVICE_TEST_SUITE(LayerNorm);
MDDP_DEVICE_TEST_SUITE(Gelu);
MDDP_DEVICE_TEST_SUITE(Heads);
MDDP_DEVICE_TEST_SUITE(CausalSoftmax);
MDDP_DEVICE_TEST_SUITE(Dropout);
MDDP_DEVICE_TEST_SUITE(AdamW);

using Doubles = std::vector<double>;

// d f / d x by central differences, f and x in double.
Doubles central_diff(const std::function<double(const Doubles&)>& f, Doubles x) {
  constexpr double kStep = 1e-4;
  Doubles g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double orig = x[i];
    x[i] = orig + kStep;
    const double hi = f(x);
    x[i] = orig - kStep;
    const double lo = f(x);
    x[i] = orig;
    g[i] = (hi - lo) / (2 * kStep);
  }
  return g;
}

// sum_i y_i r_i: a scalar whose gradient in y is r, so backward(r) is d(dot)/dx.
double dot_with(const Doubles& y, const std::vector<float>& r) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

// ---- gemm_batched ---------------------------------------------------------

// Every matrix of the batch is gemm's product: a naive double loop per matrix.
TEST_P(GemmBatched, EachMatrixMatchesTheNaiveProduct) {
  Rng rng(1);
  struct Case {
    int64_t batch, m, n, k;
  };
  for (const Case& g : {Case{1, 1, 1, 1}, Case{3, 5, 4, 7}, Case{4, 8, 8, 3}, Case{2, 1, 9, 5}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        SCOPED_TRACE(
            str("batch ", g.batch, " m ", g.m, " n ", g.n, " k ", g.k, " ta ", ta, " tb ", tb));
        Tensor a =
            put(random_tensor(ta ? Shape{g.batch, g.k, g.m} : Shape{g.batch, g.m, g.k}, rng));
        Tensor b =
            put(random_tensor(tb ? Shape{g.batch, g.n, g.k} : Shape{g.batch, g.k, g.n}, rng));
        Tensor c = put(random_tensor({g.batch, g.m, g.n}, rng));
        const auto av = a.to_vector(), bv = b.to_vector(), c0 = c.to_vector();
        ops::gemm_batched(ta, tb, 0.5f, a, b, 2.0f, c);
        Doubles want(c0.size()), bound(c0.size());
        for (int64_t q = 0; q < g.batch; ++q)
          for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < g.n; ++j) {
              double s = 0, mag = 0;
              for (int64_t p = 0; p < g.k; ++p) {
                const double x = av[q * g.m * g.k + (ta ? p * g.m + i : i * g.k + p)];
                const double y = bv[q * g.k * g.n + (tb ? j * g.k + p : p * g.n + j)];
                s += x * y;
                mag += std::abs(x * y);
              }
              const int64_t o = (q * g.m + i) * g.n + j;
              want[o] = 0.5 * s + 2.0 * c0[o];
              bound[o] = 2.0 * (g.k + 3) * kFloatEps * (0.5 * mag + 2.0 * std::abs(c0[o])) + 1e-30;
            }
        EXPECT_TRUE(all_within("gemm_batched", want, bound, c.to_vector()));
      }
}

// ---- embedding --------------------------------------------------------------

// Forward gathers rows exactly; backward adds every occurrence of an id (ids repeat).
TEST_P(Embedding, GatherAndScatterAddMatchReference) {
  Rng rng(2);
  const int64_t vocab = 7, c = 5, n = 12;
  Tensor table = put(random_tensor({vocab, c}, rng));
  Tensor ids = put(random_labels(n, vocab, rng).reshape({3, 4}));  // any shape of ids
  Tensor y = Tensor::empty({n, c}, device());
  ops::embedding_forward(ids, table, y);
  const auto tv = table.to_vector(), iv = ids.to_vector();
  Doubles want(n * c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) want[i * c + j] = tv[static_cast<int64_t>(iv[i]) * c + j];
  EXPECT_TRUE(all_close("embedding y", want, y.to_vector(), 0, 0));

  Tensor dy = put(random_tensor({n, c}, rng)), dtable = put(random_tensor({vocab, c}, rng));
  const auto dyv = dy.to_vector(), d0 = dtable.to_vector();
  ops::embedding_backward(ids, dy, dtable);
  Doubles dwant(d0.begin(), d0.end()), bound(d0.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const int64_t o = static_cast<int64_t>(iv[i]) * c + j;
      dwant[o] += dyv[i * c + j];
      bound[o] += std::abs(dyv[i * c + j]);
    }
  for (std::size_t o = 0; o < bound.size(); ++o)
    bound[o] = 2.0 * (n + 2) * kFloatEps * (bound[o] + std::abs(d0[o])) + 1e-30;
  EXPECT_TRUE(all_within("embedding dtable (accumulates)", dwant, bound, dtable.to_vector()));
}

// Ids outside the table are refused on the CPU (a GPU writes NaN rows instead).
TEST(EmbeddingCpu, IdsOutsideTheTableThrow) {
  Tensor table = Tensor::zeros({4, 2}), y = Tensor::zeros({1, 2});
  for (float bad : {-1.0f, 4.0f, 1.5f, std::nanf("")})
    EXPECT_THROW(ops::embedding_forward(Tensor::from_vector({1}, {bad}), table, y),
                 std::logic_error)
        << bad;
}

// ---- layernorm --------------------------------------------------------------

constexpr double kLnEps = 1e-5;

// y = (x - mean) / sqrt(var + eps) * w + b per row, in double.
Doubles layernorm_ref(const Doubles& x, const std::vector<float>& w, const std::vector<float>& b,
                      int64_t n, int64_t c) {
  Doubles y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j] / c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m) / c;
    for (int64_t j = 0; j < c; ++j)
      y[i * c + j] = (x[i * c + j] - m) / std::sqrt(v + kLnEps) * w[j] + b[j];
  }
  return y;
}

TEST_P(LayerNorm, ForwardAndBackwardMatchTheDoubleFormula) {
  Rng rng(3);
  for (const auto& shape : {std::pair<int64_t, int64_t>{1, 1}, {3, 8}, {5, 13}}) {
    const int64_t n = shape.first, c = shape.second;  // (lambdas below capture them)
    SCOPED_TRACE(str("N ", n, " C ", c));
    Tensor x = put(random_tensor({n, c}, rng, -2, 2)), w = put(random_tensor({c}, rng)),
           b = put(random_tensor({c}, rng));
    Tensor y = Tensor::empty({n, c}, device()), mean = Tensor::empty({n}, device()),
           rstd = Tensor::empty({n}, device());
    ops::layernorm_forward(x, w, b, kLnEps, y, mean, rstd);
    const auto xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    const Doubles xd(xv.begin(), xv.end());
    EXPECT_TRUE(all_close("layernorm y", layernorm_ref(xd, wv, bv, n, c), y.to_vector(), 1e-5, 1e-5,
                          c == 1));

    const Tensor r = put(random_tensor({n, c}, rng));
    const auto rv = r.to_vector();
    Tensor dx = Tensor::empty({n, c}, device()), dw = put(random_tensor({c}, rng)),
           db = put(random_tensor({c}, rng));
    const auto dw0 = dw.to_vector(), db0 = db.to_vector();
    ops::layernorm_backward(x, w, mean, rstd, r, dx, dw, db);
    // dx by differences in x; dw, db by differences in the parameters (plus their old values).
    const auto loss_x = [&](const Doubles& v) {
      return dot_with(layernorm_ref(v, wv, bv, n, c), rv);
    };
    EXPECT_TRUE(
        all_close("layernorm dx", central_diff(loss_x, xd), dx.to_vector(), 1e-3, 1e-4, c == 1));
    const auto as_float = [](const Doubles& v) { return std::vector<float>(v.begin(), v.end()); };
    const auto loss_w = [&](const Doubles& v) {
      return dot_with(layernorm_ref(xd, as_float(v), bv, n, c), rv);
    };
    const auto loss_b = [&](const Doubles& v) {
      return dot_with(layernorm_ref(xd, wv, as_float(v), n, c), rv);
    };
    Doubles dw_want = central_diff(loss_w, Doubles(wv.begin(), wv.end()));
    Doubles db_want = central_diff(loss_b, Doubles(bv.begin(), bv.end()));
    for (int64_t j = 0; j < c; ++j) {
      dw_want[j] += dw0[j];
      db_want[j] += db0[j];
    }
    EXPECT_TRUE(all_close("layernorm dweight (accumulates)", dw_want, dw.to_vector(), 1e-3, 1e-4));
    EXPECT_TRUE(all_close("layernorm dbias (accumulates)", db_want, db.to_vector(), 1e-3, 1e-4));
  }
}

// ---- gelu -----------------------------------------------------------------

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST_P(Gelu, ForwardAndBackwardMatchTheTanhFormula) {
  Rng rng(4);
  Tensor x = put(random_tensor({7, 9}, rng, -5, 5)), y = Tensor::empty({7, 9}, device());
  ops::gelu_forward(x, y);
  const auto xv = x.to_vector();
  Doubles want(xv.size()), slope(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    want[i] = gelu_ref(xv[i]);
    slope[i] = (gelu_ref(xv[i] + 1e-4) - gelu_ref(xv[i] - 1e-4)) / 2e-4;
  }
  EXPECT_TRUE(all_close("gelu y", want, y.to_vector(), 1e-5, 1e-6));
  Tensor dy = put(random_tensor({7, 9}, rng)), dx = Tensor::empty({7, 9}, device());
  ops::gelu_backward(x, dy, dx);
  const auto dyv = dy.to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i) want[i] = slope[i] * dyv[i];
  EXPECT_TRUE(all_close("gelu dx", want, dx.to_vector(), 1e-4, 1e-6));
}

// ---- heads ------------------------------------------------------------------

// split_heads puts x[b, t, p, h, d] at heads[p, b, h, t, d]; merge_heads undoes it exactly.
TEST_P(Heads, SplitMovesEveryElementAndMergeUndoesIt) {
  Rng rng(5);
  const int64_t p = 3, b = 2, h = 4, t = 5, d = 3;
  Tensor x = put(random_tensor({b, t, p * h * d}, rng));
  Tensor heads = Tensor::empty({p, b, h, t, d}, device());
  ops::split_heads(x, heads);
  const auto xv = x.to_vector(), hv = heads.to_vector();
  for (int64_t pi = 0; pi < p; ++pi)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t di = 0; di < d; ++di)
            ASSERT_EQ(hv[(((pi * b + bi) * h + hi) * t + ti) * d + di],
                      xv[((bi * t + ti) * p + pi) * h * d + hi * d + di]);
  Tensor back = Tensor::empty(x.shape(), device());
  ops::merge_heads(heads, back);
  EXPECT_TRUE(bitwise_equal(back.to_vector(), xv));
  Tensor wrong = Tensor::empty({p, b, h, t, d + 1}, device());
  EXPECT_THROW(ops::split_heads(x, wrong), std::logic_error);
}

// ---- causal softmax ---------------------------------------------------------

// Row i of each [T, T] matrix: the softmax of its first i + 1 scores, in double.
Doubles causal_softmax_ref(const Doubles& s, int64_t n, int64_t t) {
  Doubles p(s.size(), 0.0);
  for (int64_t r = 0; r < n * t; ++r) {
    const int64_t i = r % t;
    double mx = s[r * t], sum = 0;
    for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, s[r * t + j]);
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[r * t + j] - mx);
    for (int64_t j = 0; j <= i; ++j) p[r * t + j] = std::exp(s[r * t + j] - mx) / sum;
  }
  return p;
}

TEST_P(CausalSoftmax, ForwardAndBackwardMatchTheMaskedSoftmax) {
  Rng rng(6);
  for (const auto& shape : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 8}}) {
    const int64_t n = shape.first, t = shape.second;  // (lambdas below capture them)
    SCOPED_TRACE(str("N ", n, " T ", t));
    Tensor s = put(random_tensor({n, t, t}, rng, -3, 3));
    const auto sv = s.to_vector();
    const Doubles sd(sv.begin(), sv.end());
    Tensor p = Tensor::empty(s.shape(), device());
    ops::causal_softmax_forward(s, p);
    const auto pv = p.to_vector();
    EXPECT_TRUE(all_close("probs", causal_softmax_ref(sd, n, t), pv, 1e-5, 1e-6));
    for (int64_t r = 0; r < n * t; ++r)  // the mask is exact zeros, not small numbers
      for (int64_t j = r % t + 1; j < t; ++j) ASSERT_EQ(pv[r * t + j], 0.0f);

    const Tensor dp = put(random_tensor(s.shape(), rng));
    Tensor ds = Tensor::empty(s.shape(), device());
    ops::causal_softmax_backward(p, dp, ds);
    const auto loss = [&](const Doubles& v) {
      return dot_with(causal_softmax_ref(v, n, t), dp.to_vector());
    };
    EXPECT_TRUE(all_close("dscores", central_diff(loss, sd), ds.to_vector(), 1e-3, 1e-5, t == 1));

    Tensor in_place = s.to(device());  // probs written over the scores, then dscores over dprobs
    ops::causal_softmax_forward(in_place, in_place);
    EXPECT_TRUE(bitwise_equal(in_place.to_vector(), pv));
    Tensor dp_copy = dp.to(device());
    ops::causal_softmax_backward(p, dp_copy, dp_copy);
    EXPECT_TRUE(bitwise_equal(dp_copy.to_vector(), ds.to_vector()));
  }
}

// ---- dropout ----------------------------------------------------------------

// A seed's mask is reproducible, another seed's differs, about p of the
// elements are dropped, the kept ones scaled exactly by 1/(1-p); p = 0 is the identity.
TEST_P(Dropout, MaskIsAFunctionOfTheSeedAndScalesTheKept) {
  Rng rng(7);
  const int64_t n = 20000;
  const float p = 0.25f;
  Tensor x = put(random_tensor({n}, rng, 1, 2)), y = Tensor::empty({n}, device()),
         again = Tensor::empty({n}, device()), other = Tensor::empty({n}, device());
  ops::dropout(x, p, 11, y);
  ops::dropout(x, p, 11, again);
  ops::dropout(x, p, 12, other);
  const auto xv = x.to_vector(), yv = y.to_vector();
  EXPECT_TRUE(bitwise_equal(yv, again.to_vector()));
  EXPECT_FALSE(bitwise_equal(yv, other.to_vector()));
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (yv[i] == 0.0f) {
      ++dropped;
      continue;
    }
    ASSERT_EQ(yv[i], xv[i] * (1.0f / (1.0f - p))) << i;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.015);  // ~5 standard deviations
  ops::dropout(x, 0.0f, 11, y);
  EXPECT_TRUE(bitwise_equal(y.to_vector(), xv));
  EXPECT_THROW(ops::dropout(x, 1.0f, 11, y), std::logic_error);
}

// ---- adamw, sum of squares --------------------------------------------------

// One AdamW step matches PyTorch's formula in double: the decay shrinks the
// weight (lr * wd) and stays out of the moments.
TEST_P(AdamW, StepMatchesTheDecoupledFormula) {
  Rng rng(8);
  const int64_t n = 37, step = 3;
  const double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8;
  Tensor p = put(random_tensor({n}, rng)), g = put(random_tensor({n}, rng));
  Tensor m = put(random_tensor({n}, rng)), v = put(random_tensor({n}, rng, 0.0f, 1.0f));
  const auto p0 = p.to_vector(), gv = g.to_vector(), m0 = m.to_vector(), v0 = v.to_vector();
  ops::adamw_update(p, g, m, v, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
  Doubles p_want(n), m_want(n), v_want(n);
  for (int64_t i = 0; i < n; ++i) {
    m_want[i] = b1 * m0[i] + (1 - b1) * gv[i];
    v_want[i] = b2 * v0[i] + (1 - b2) * gv[i] * gv[i];
    const double m_hat = m_want[i] / (1 - std::pow(b1, step)),
                 v_hat = v_want[i] / (1 - std::pow(b2, step));
    p_want[i] = p0[i] * (1 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
  }
  EXPECT_TRUE(all_close("adamw m", m_want, m.to_vector(), 1e-5, 1e-6));
  EXPECT_TRUE(all_close("adamw v", v_want, v.to_vector(), 1e-5, 1e-6));
  EXPECT_TRUE(all_close("adamw param", p_want, p.to_vector(), 1e-5, 1e-6));
}

// sum_squares adds the sum of x^2 to its one-element output.
TEST_P(AdamW, SumSquaresAccumulates) {
  Rng rng(9);
  Tensor x = put(random_tensor({1001}, rng)), out = Tensor::from_vector({1}, {0.5f}, device());
  ops::sum_squares(x, out);
  double want = 0.5;
  for (float v : x.to_vector()) want += static_cast<double>(v) * v;
  EXPECT_NEAR(out.to_vector()[0], want, 1e-6 * want);
}

}  // namespace
}  // namespace mddp::test
