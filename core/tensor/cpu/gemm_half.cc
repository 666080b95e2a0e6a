// The 16-bit GEMMs of mixed precision (Note [Autocast] in ../precision.h):
// c = alpha * op(a) op(b) + beta * c with a and b rounded to bf16 or fp16
// and the products accumulated in fp32. Two ways, with the same rounding:
//
//  * native: a and b are converted to bf16 and multiplied by oneDNN's bf16
//    matmul (f32 destination), on CPUs with AVX-512 BF16;
//  * fallback: a and b are rounded to 16 bits and back to fp32, then
//    multiplied by the fp32 GEMM (gemm.cc). Exact products of the rounded
//    inputs, so only the order of the fp32 additions differs from native.
#include <cstdlib>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor::cpu {
namespace {

bool cpu_has_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

bool forced_fallback() {
  const char* env = std::getenv("MICRODDP_BF16_GEMM");
  if (env == nullptr || std::strcmp(env, "auto") == 0) return false;
  if (std::strcmp(env, "emulate") == 0) return true;
  throw InputError(str("MICRODDP_BF16_GEMM must be auto or emulate, got '", env, "'"));
}

// x [n] rounded to `format` and back, into `out` (resized).
void round_trip(const float* x, int64_t n, HalfFormat format, std::vector<uint16_t>& bits,
                std::vector<float>& out) {
  bits.resize(static_cast<size_t>(n));
  out.resize(static_cast<size_t>(n));
  round_to_half(x, n, format, bits.data());
  widen_from_half(bits.data(), n, format, out.data());
}

// One oneDNN matmul per shape, made once per thread (creating a primitive
// costs far more than a small training GEMM).
using MatmulKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, float, float>;

struct Onednn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<MatmulKey, dnnl::matmul> matmuls;
};

Onednn& onednn() {
  thread_local Onednn o;
  return o;
}

void native_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  using dnnl::memory;
  thread_local std::vector<uint16_t> a16, b16;
  a16.resize(static_cast<size_t>(m * k));
  b16.resize(static_cast<size_t>(k * n));
  round_to_half(a, m * k, HalfFormat::kBf16, a16.data());  // bf16 bits are oneDNN's bf16 layout
  round_to_half(b, k * n, HalfFormat::kBf16, b16.data());
  // Row-major buffers; a transposed operand is the same buffer with swapped strides.
  const memory::desc a_md({m, k}, memory::data_type::bf16,
                          trans_a ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b_md({k, n}, memory::data_type::bf16,
                          trans_b ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{n, 1});
  Onednn& o = onednn();
  const MatmulKey key{trans_a, trans_b, m, n, k, alpha, beta};
  auto it = o.matmuls.find(key);
  if (it == o.matmuls.end()) {
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, o.engine);
    it = o.matmuls.emplace(key, dnnl::matmul(pd)).first;
  }
  it->second.execute(o.stream, {{DNNL_ARG_SRC, memory(a_md, o.engine, a16.data())},
                                {DNNL_ARG_WEIGHTS, memory(b_md, o.engine, b16.data())},
                                {DNNL_ARG_DST, memory(c_md, o.engine, c)}});
  o.stream.wait();
}

}  // namespace

bool native_bf16_gemm() {
  static const bool native = cpu_has_bf16() && !forced_fallback();
  return native;
}

const char* bf16_fallback_reason() {
  if (!cpu_has_bf16()) return "this CPU has no AVX-512 BF16";
  if (forced_fallback()) return "MICRODDP_BF16_GEMM=emulate";
  return "none";
}

void gemm_half(HalfFormat format, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0 || k == 0) return gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  if (format == HalfFormat::kBf16 && native_bf16_gemm()) {
    try {
      return native_bf16(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    } catch (const dnnl::error& e) {
      MDDP_CHECK(false, "oneDNN bf16 matmul failed (", e.what(), ") for m=", m, " n=", n, " k=", k);
    }
  }
  thread_local std::vector<uint16_t> bits;
  thread_local std::vector<float> a_r, b_r;
  round_trip(a, m * k, format, bits, a_r);
  round_trip(b, k * n, format, bits, b_r);
  gemm(trans_a, trans_b, m, n, k, alpha, a_r.data(), b_r.data(), beta, c);
}

}  // namespace mddp::tensor::cpu
