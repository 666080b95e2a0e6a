// Shared helpers for the numerical unit tests: random tensors, double-precision
// reference losses, a central-difference gradient and an element-wise
// comparison that reports the worst mismatches. Nothing here calls the code
// under test's arithmetic: the references are written out in double.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/common/rng.h"
#include "core/tensor/tensor.h"

namespace mddp::test {

using tensor::Shape;
using tensor::Tensor;

// Uniform in [lo, hi), from the project's seeded generator.
inline std::vector<float> random_values(int64_t n, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline Tensor random_tensor(const Shape& shape, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_vector(shape, random_values(tensor::numel_of(shape), rng, lo, hi));
}

// Random class indices in [0, classes), stored as floats like the ops expect.
inline Tensor random_labels(int64_t n, int64_t classes, Rng& rng) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.below(static_cast<uint64_t>(classes)));
  return Tensor::from_vector({n}, v);
}

// ---- double-precision reference losses -------------------------------------

// Mean over rows of logsumexp(row) - row[label], logits [n, classes].
inline double xent_ref(const std::vector<float>& logits, const std::vector<float>& labels,
                       int64_t n, int64_t classes) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits.data() + i * classes;
    double mx = row[0];
    for (int64_t j = 1; j < classes; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
    total += mx + std::log(sum) - row[static_cast<int64_t>(labels[i])];
  }
  return total / static_cast<double>(n);
}

// Mean over all elements of (pred - target)^2.
inline double mse_ref(const std::vector<float>& pred, const std::vector<float>& target) {
  double s = 0.0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const double d = static_cast<double>(pred[i]) - target[i];
    s += d * d;
  }
  return s / static_cast<double>(pred.size());
}

// sum_i y_i r_i: a linear "loss" whose gradient with respect to y is exactly r.
inline double dot_ref(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// ---- finite differences ----------------------------------------------------

// Central difference of f with respect to every element of t: t[i] is set to
// t[i] + eps and t[i] - eps, f is evaluated at both, and t[i] is restored bit
// for bit. The denominator is the step actually taken after float rounding.
// The error is O(eps^2 f''') from truncation plus (noise in f) / eps.
// If `smooth` is given, it is asked after every evaluation of f whether that
// evaluation stayed on the same smooth piece as the unperturbed point (no ReLU
// or max-pool kink crossed); if not, the step is halved and retried (down to
// eps / 128), and the result is NaN, failing any comparison, if it never does.
inline std::vector<double> numeric_grad(Tensor& t, const std::function<double()>& f, float eps,
                                        const std::function<bool()>& smooth = {}) {
  std::vector<double> g(static_cast<std::size_t>(t.numel()), std::nan(""));
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float orig = p[i];
    float e = eps;
    for (int attempt = 0; attempt < 8; ++attempt, e /= 2) {
      const float hi = orig + e, lo = orig - e;
      p[i] = hi;
      const double f_hi = f();
      bool ok = !smooth || smooth();
      p[i] = lo;
      const double f_lo = f();
      ok = ok && (!smooth || smooth());
      if (ok) {
        g[static_cast<std::size_t>(i)] = (f_hi - f_lo) / (static_cast<double>(hi) - lo);
        break;
      }
    }
    p[i] = orig;
  }
  return g;
}

// Passes when every |actual_i - expected_i| <= atol + rtol * |expected_i|,
// with atol = atol_frac * max(max_i |expected_i|, scale_floor) (scale-free;
// scale_floor lets a whole-model check use the model's largest gradient), and
// the expected values are not identically zero (a vacuous check). On failure
// it names the tensor, the number of mismatches, the worst one and the first few.
inline ::testing::AssertionResult all_close(const std::string& what,
                                            const std::vector<double>& expected,
                                            const std::vector<float>& actual, double rtol,
                                            double atol_frac, bool allow_all_zero = false,
                                            double scale_floor = 0.0) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << what << ": size " << actual.size() << " vs expected " << expected.size();
  double scale = 0.0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  if (scale == 0.0 && !allow_all_zero && !expected.empty())
    return ::testing::AssertionFailure() << what << ": expected values are all zero (vacuous)";
  scale = std::max(scale, scale_floor);
  const double atol = atol_frac * scale;
  std::size_t bad = 0, worst = 0;
  double worst_excess = -1.0;
  std::ostringstream first;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double tol = atol + rtol * std::abs(expected[i]);
    if (err / (tol > 0 ? tol : 1e-300) > worst_excess) {
      worst_excess = err / (tol > 0 ? tol : 1e-300);
      worst = i;
    }
    if (!(err <= tol)) {  // also catches NaN
      if (bad < 5) first << " [" << i << "] got " << actual[i] << " want " << expected[i] << ";";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << expected.size() << " elements differ (rtol " << rtol
         << ", atol " << atol << "); worst [" << worst << "] got " << actual[worst] << " want "
         << expected[worst] << "; first:" << first.str();
}

// Passes when every |actual_i - expected_i| <= bound_i: for sums of products
// computed in float, bound_i is a rounding-error bound such as
// 2 (terms + 2) 2^-24 sum|products| (the classic gamma_n bound, doubled).
inline ::testing::AssertionResult all_within(const std::string& what,
                                             const std::vector<double>& expected,
                                             const std::vector<double>& bound,
                                             const std::vector<float>& actual) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure()
           << what << ": size " << actual.size() << " vs expected " << expected.size();
  std::size_t bad = 0;
  double max_err = 0.0;
  std::ostringstream first;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    max_err = std::max(max_err, err);
    if (!(err <= bound[i])) {
      if (bad < 5)
        first << " [" << i << "] got " << actual[i] << " want " << expected[i] << " (bound "
              << bound[i] << ");";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << expected.size()
         << " elements out of bounds, max |err| " << max_err << "; first:" << first.str();
}

// 2^-24, the unit roundoff of float.
inline constexpr double kFloatEps = 0x1.0p-24;

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Bitwise equality of two float vectors (NaN payloads included).
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

// The message of the exception of type E that f throws; fails the test if f
// does not throw E.
template <typename E, typename F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, none was thrown";
  return "";
}

}  // namespace mddp::test
