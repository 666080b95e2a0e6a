// --precision: what it means for a training job beyond the GEMMs
// (Note [Autocast] in core/tensor/precision.h; docs/ddp.md "Mixed precision").
//
//   fp32  everything in fp32 (the default).
//   bf16  forward and backward GEMMs in bf16; DDP all-reduces the gradients
//         in bf16 (--compress bf16) unless --compress names another scheme.
//   fp16  the same in fp16, with dynamic loss scaling (loss_scaler.h).
//
// Master weights, gradients and optimiser state stay fp32 in every mode;
// collectives accumulate 16-bit wire values in fp32 (core/comm/reduce_kernels.h).
#pragma once

#include <string>

#include "core/tensor/precision.h"
#include "core/train/config.h"

namespace mddp::train {

// Throws InputError naming the flag for a bad --precision or --loss-scale*.
void validate_precision(const TrainConfig& cfg);

// What DDP sends: --compress, except that --precision bf16/fp16 turns the
// default "none" into its own 16-bit format (not with --local-sgd, which
// averages parameters in fp32 and has no gradients to send).
std::string effective_compress(const TrainConfig& cfg);

// One line for the config table and the logs: "bf16 (oneDNN bf16 matmul
// (AVX-512 BF16), fp32 accumulation), loss scale 65536" and the like.
std::string describe_precision(const TrainConfig& cfg);

}  // namespace mddp::train
