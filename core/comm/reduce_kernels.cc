#include "core/comm/reduce_kernels.h"

#include <cstdint>

#include "core/common/half.h"

namespace mddp::comm {
namespace {

// How each wire type widens to fp32 and narrows back.
struct F32 {
  using T = float;
  static float load(T v) { return v; }
  static T store(float f) { return f; }
};
struct F16 {
  using T = uint16_t;
  static float load(T v) { return fp16_to_float(v); }
  static T store(float f) { return float_to_fp16(f); }
};
struct BF16 {
  using T = uint16_t;
  static float load(T v) { return bf16_to_float(v); }
  static T store(float f) { return float_to_bf16(f); }
};

struct Sum {
  static float apply(float a, float b) { return a + b; }
};
struct Max {
  static float apply(float a, float b) { return b > a ? b : a; }
};
struct Min {
  static float apply(float a, float b) { return b < a ? b : a; }
};

// Calls fn.template operator()<D, Op>() for the runtime (dtype, op) pair, so
// each loop below is compiled once per combination with nothing but the
// arithmetic inside it (and vectorizes for fp32).
template <typename Fn>
void dispatch(DataType t, ReduceOp op, Fn&& fn) {
  auto with_op = [&]<typename D>() {
    switch (combine_op(op)) {
      case ReduceOp::kSum:
        return fn.template operator()<D, Sum>();
      case ReduceOp::kMax:
        return fn.template operator()<D, Max>();
      case ReduceOp::kMin:
        return fn.template operator()<D, Min>();
      case ReduceOp::kAvg:
        break;
    }
    MDDP_CHECK(false, "unknown reduce op ", static_cast<int>(op));
  };
  switch (t) {
    case DataType::kFloat32:
      return with_op.template operator()<F32>();
    case DataType::kFloat16:
      return with_op.template operator()<F16>();
    case DataType::kBFloat16:
      return with_op.template operator()<BF16>();
  }
  MDDP_CHECK(false, "unknown dtype ", static_cast<int>(t));
}

}  // namespace

double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 1.0 / (1 << 24);
    case DataType::kFloat16:
      return 1.0 / (1 << 11);
    case DataType::kBFloat16:
      return 1.0 / (1 << 8);
  }
  MDDP_CHECK(false, "unknown dtype ", static_cast<int>(t));
}

void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType t, ReduceOp op) {
  dispatch(t, op, [&]<typename D, typename Op>() {
    using T = typename D::T;
    auto* d = static_cast<T*>(dst);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    for (std::size_t i = 0; i < n; ++i) d[i] = D::store(Op::apply(D::load(x[i]), D::load(y[i])));
  });
}

void accumulate(float* acc, const void* src, std::size_t n, DataType t, ReduceOp op) {
  dispatch(t, op, [&]<typename D, typename Op>() {
    const auto* s = static_cast<const typename D::T*>(src);
    for (std::size_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], D::load(s[i]));
  });
}

void to_float(float* dst, const void* src, std::size_t n, DataType t) {
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    const auto* s = static_cast<const typename D::T*>(src);
    for (std::size_t i = 0; i < n; ++i) dst[i] = D::load(s[i]);
  });
}

// Division, not multiplication by 1/divisor: sum/n is then the correctly
// rounded mean of an exactly computed sum.
void from_float(void* dst, const float* src, std::size_t n, DataType t, float divisor) {
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    auto* d = static_cast<typename D::T*>(dst);
    if (divisor == 1.0f) {
      for (std::size_t i = 0; i < n; ++i) d[i] = D::store(src[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) d[i] = D::store(src[i] / divisor);
    }
  });
}

void divide(void* data, std::size_t n, DataType t, float divisor) {
  if (divisor == 1.0f) return;
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    auto* d = static_cast<typename D::T*>(data);
    for (std::size_t i = 0; i < n; ++i) d[i] = D::store(D::load(d[i]) / divisor);
  });
}

}  // namespace mddp::comm
