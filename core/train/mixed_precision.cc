#include "core/train/mixed_precision.h"

#include <cmath>

#include "core/common/check.h"

namespace mddp::train {

void validate_precision(const TrainConfig& cfg) {
  tensor::parse_precision(cfg.precision);
  if (!(std::isfinite(cfg.loss_scale.init) && cfg.loss_scale.init > 0))
    throw InputError(str("--loss-scale must be a positive number, got ", cfg.loss_scale.init));
  if (cfg.loss_scale.window < 1)
    throw InputError(str("--loss-scale-window must be at least 1, got ", cfg.loss_scale.window));
  // ZeRO-1's ranks each see only their shard of the reduced gradients, so
  // they could disagree on whether a step overflowed and must be skipped.
  if (cfg.dist.ddp == "sharded" &&
      tensor::parse_precision(cfg.precision) == tensor::Precision::kFp16)
    throw InputError(
        "--precision fp16 cannot be used with --ddp sharded: each rank checks only its shard of "
        "the "
        "gradients for overflow, so the ranks could disagree on skipping a step; use --precision "
        "bf16 "
        "(no loss scaling) or --ddp bucketed");
}

std::string effective_compress(const TrainConfig& cfg) {
  const tensor::Precision p = tensor::parse_precision(cfg.precision);
  // --local-sgd averages fp32 parameters; --ddp sharded reduce-scatters fp32 gradients
  // unless --compress fp16/bf16 asks for 16 bits.
  if (p == tensor::Precision::kFp32 || cfg.dist.compress != "none" || cfg.dist.local_sgd > 0 ||
      cfg.dist.ddp == "sharded")
    return cfg.dist.compress;
  return tensor::to_string(p);
}

std::string describe_precision(const TrainConfig& cfg) {
  const tensor::Precision p = tensor::parse_precision(cfg.precision);
  if (p == tensor::Precision::kFp32) return "fp32";
  const std::string gemm = cfg.device.starts_with("cuda")
                               ? "cuBLAS tensor-op GEMM, fp32 accumulation"
                               : tensor::cpu_gemm_description(p);
  std::string s = str(cfg.precision, " GEMMs (", gemm, ")");
  if (p == tensor::Precision::kFp16)
    s += str(", loss scale ", cfg.loss_scale.init, " every ", cfg.loss_scale.window);
  return s;
}

}  // namespace mddp::train
