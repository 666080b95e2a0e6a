// The precision of the training GEMMs (--precision), chosen per thread.
//
// Note [Autocast]. Mixed precision keeps every tensor in fp32 (master
// weights, activations, gradients, optimiser state) and runs only the
// matrix products in 16 bits: their inputs are rounded to bf16 or fp16
// (round to nearest, ties to even: core/common/half.h) and the products are
// accumulated and stored in fp32. Like torch.autocast, the setting belongs to
// the calling thread (PrecisionScope): the trainer opens a scope around the
// forward and backward, so every other GEMM (PowerSGD's factors, the
// evaluation outside the scope, tests) stays fp32 unless it asks.
//
// On the CPU a bf16 GEMM runs as oneDNN's bf16 matmul when the CPU has
// AVX-512 BF16 (the vdpbf16ps instruction); without it, and for fp16 always
// (oneDNN's CPU fp16 matmul needs AVX-512 FP16), the inputs are rounded to
// 16 bits and multiplied by the fp32 GEMM: the same rounding, fp32's speed.
// On a GPU cuBLAS runs the fp32 GEMM on tensor cores with 16-bit inputs
// (CUBLAS_COMPUTE_32F_FAST_16BF / _16F).
#pragma once

#include <string>

namespace mddp::tensor {

enum class Precision { kFp32, kBf16, kFp16 };

const char* to_string(Precision p);  // "fp32", "bf16", "fp16"
// "fp32", "bf16" or "fp16"; throws InputError naming --precision otherwise.
Precision parse_precision(const std::string& text);

// The calling thread's GEMM precision (kFp32 unless a PrecisionScope is open).
Precision gemm_precision();

// Sets the calling thread's GEMM precision until destroyed (scopes nest).
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision previous_;
};

// Whether the CPU GEMM of `p` runs natively (oneDNN bf16 on AVX-512 BF16),
// and one line saying how it runs ("oneDNN bf16 matmul (AVX-512 BF16)", or
// the fallback and why). MICRODDP_BF16_GEMM=emulate forces the fallback (for
// benchmarks and for testing one path against the other).
bool cpu_gemm_is_native(Precision p);
std::string cpu_gemm_description(Precision p);

}  // namespace mddp::tensor
