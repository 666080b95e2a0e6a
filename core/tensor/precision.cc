#include "core/tensor/precision.h"

#include "core/common/check.h"
#include "core/tensor/cpu/kernels.h"

namespace mddp::tensor {
namespace {
thread_local Precision current = Precision::kFp32;
}  // namespace

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

Precision parse_precision(const std::string& text) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    if (text == to_string(p)) return p;
  throw InputError(str("--precision '", text, "': expected fp32, bf16 or fp16"));
}

Precision gemm_precision() {
  return current;
}

PrecisionScope::PrecisionScope(Precision p) : previous_(current) {
  current = p;
}
PrecisionScope::~PrecisionScope() {
  current = previous_;
}

bool cpu_gemm_is_native(Precision p) {
  return p == Precision::kFp32 || (p == Precision::kBf16 && cpu::native_bf16_gemm());
}

std::string cpu_gemm_description(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return str(cpu::gemm_policy(), " (fp32)");
    case Precision::kBf16:
      if (cpu::native_bf16_gemm()) return "oneDNN bf16 matmul (AVX-512 BF16), fp32 accumulation";
      return str("bf16-rounded inputs through ", cpu::gemm_policy(), ": ",
                 cpu::bf16_fallback_reason(), "; same rounding, no speed-up");
    case Precision::kFp16:
      return str("fp16-rounded inputs through ", cpu::gemm_policy(),
                 ": oneDNN's CPU fp16 matmul needs AVX-512 FP16; same rounding, no speed-up");
  }
  return "?";
}

}  // namespace mddp::tensor
