#include "core/comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

#include "core/common/half.h"
#include "core/common/half_convert.h"

namespace mddp::comm {
namespace {

// How each wire type widens to fp32 and narrows back. fp32 and bf16 (a
// shift and a rounding add) convert one value at a time inside each loop,
// which the compiler vectorises. fp16's conversion branches per value, so
// fp16 goes a block at a time through the buffer conversions, which use
// F16C where the CPU has it (half_convert.h); one value at a time it was
// the whole cost of an fp16 all-reduce (3x slower than bf16).
struct F32 {
  using T = float;
  static constexpr bool kBlocks = false;
  static float load(T v) { return v; }
  static T store(float f) { return f; }
};
struct BF16 {
  using T = uint16_t;
  static constexpr bool kBlocks = false;
  static float load(T v) { return bf16_to_float(v); }
  static T store(float f) { return float_to_bf16(f); }
};
struct F16 {
  using T = uint16_t;
  static constexpr bool kBlocks = true;
  static void load_n(const T* s, std::size_t n, float* d) { fp16_to_float_n(s, n, d); }
  static void store_n(const float* s, std::size_t n, T* d) { float_to_fp16_n(s, n, d); }
};

// Block-converted data is reduced a block at a time through fp32 scratch
// on the stack: widen the block, combine in fp32, narrow once.
constexpr std::size_t kBlock = 512;

// Calls fn(offset, count) for consecutive blocks covering [0, n).
template <typename Fn>
void for_blocks(std::size_t n, Fn&& fn) {
  for (std::size_t i = 0; i < n; i += kBlock) fn(i, std::min(kBlock, n - i));
}

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
    if constexpr (!D::kBlocks) {
      for (std::size_t i = 0; i < n; ++i) d[i] = D::store(Op::apply(D::load(x[i]), D::load(y[i])));
    } else {  // a whole block is read before any of it is written: dst may alias a or b
      float fx[kBlock], fy[kBlock];
      for_blocks(n, [&](std::size_t i, std::size_t m) {
        D::load_n(x + i, m, fx);
        D::load_n(y + i, m, fy);
        for (std::size_t j = 0; j < m; ++j) fx[j] = Op::apply(fx[j], fy[j]);
        D::store_n(fx, m, d + i);
      });
    }
  });
}

void accumulate(float* acc, const void* src, std::size_t n, DataType t, ReduceOp op) {
  dispatch(t, op, [&]<typename D, typename Op>() {
    const auto* s = static_cast<const typename D::T*>(src);
    if constexpr (!D::kBlocks) {
      for (std::size_t i = 0; i < n; ++i) acc[i] = Op::apply(acc[i], D::load(s[i]));
    } else {
      float f[kBlock];
      for_blocks(n, [&](std::size_t i, std::size_t m) {
        D::load_n(s + i, m, f);
        for (std::size_t j = 0; j < m; ++j) acc[i + j] = Op::apply(acc[i + j], f[j]);
      });
    }
  });
}

void to_float(float* dst, const void* src, std::size_t n, DataType t) {
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    const auto* s = static_cast<const typename D::T*>(src);
    if constexpr (!D::kBlocks) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = D::load(s[i]);
    } else {
      D::load_n(s, n, dst);
    }
  });
}

// Division, not multiplication by 1/divisor: sum/n is then the correctly
// rounded mean of an exactly computed sum.
void from_float(void* dst, const float* src, std::size_t n, DataType t, float divisor) {
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    auto* d = static_cast<typename D::T*>(dst);
    if constexpr (!D::kBlocks) {
      if (divisor == 1.0f) {
        for (std::size_t i = 0; i < n; ++i) d[i] = D::store(src[i]);
      } else {
        for (std::size_t i = 0; i < n; ++i) d[i] = D::store(src[i] / divisor);
      }
    } else if (divisor == 1.0f) {
      D::store_n(src, n, d);
    } else {
      float f[kBlock];
      for_blocks(n, [&](std::size_t i, std::size_t m) {
        for (std::size_t j = 0; j < m; ++j) f[j] = src[i + j] / divisor;
        D::store_n(f, m, d + i);
      });
    }
  });
}

void divide(void* data, std::size_t n, DataType t, float divisor) {
  if (divisor == 1.0f) return;
  dispatch(t, ReduceOp::kSum, [&]<typename D, typename>() {
    auto* d = static_cast<typename D::T*>(data);
    if constexpr (!D::kBlocks) {
      for (std::size_t i = 0; i < n; ++i) d[i] = D::store(D::load(d[i]) / divisor);
    } else {
      float f[kBlock];
      for_blocks(n, [&](std::size_t i, std::size_t m) {
        D::load_n(d + i, m, f);
        for (std::size_t j = 0; j < m; ++j) f[j] /= divisor;
        D::store_n(f, m, d + i);
      });
    }
  });
}

}  // namespace mddp::comm
