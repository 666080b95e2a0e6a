// What DDP sends instead of the fp32 gradients (`--compress`): the choice and
// its parameter. docs/ddp.md "Compression" explains each; the units that do
// it are in sync_unit.h.
//
//   none          fp32 all-reduce of every gradient
//   fp16 | bf16   the gradients rounded to 16 bits for the wire, summed in fp32
//   topk:RATIO    top-k sparsification with error feedback: each rank sends
//                 the ceil(RATIO * n) largest-magnitude entries of each bucket
//                 (values and indices), all ranks all-gather them and sum
//                 locally; what was not sent is kept and added next step
//   powersgd:RANK PowerSGD (Vogels et al. 2019, PyTorch's powerSGD_hook): each
//                 matrix gradient M [n, m] is sent as P [n, r] and Q [m, r],
//                 M ~ P Q^T, one power-iteration step per training step with
//                 Q warm-started from the last step, error feedback; 1-D
//                 gradients (biases), and matrices the factors would not
//                 shrink enough, travel uncompressed
#pragma once

#include <string>

#include "core/comm/types.h"
#include "core/common/half.h"

namespace mddp::ddp {

enum class CompressionKind { kNone, kFp16, kBf16, kTopK, kPowerSgd };

struct Compression {
  CompressionKind kind = CompressionKind::kNone;
  double ratio = 1.0;  // topk: the share of each bucket's entries a rank sends, in (0, 1]
  int rank = 1;        // powersgd: the rank r of the approximation
  // powersgd: a matrix is compressed only when (n + m) r * rate < n m, i.e.
  // the factors are at least `rate` times smaller (PyTorch's
  // min_compression_rate, default 2); 0 compresses every matrix (tests).
  double min_compression_rate = 2.0;

  bool is_half() const { return kind == CompressionKind::kFp16 || kind == CompressionKind::kBf16; }
};

// none | fp16 | bf16 | topk:RATIO (0 < RATIO <= 1, e.g. topk:0.01) |
// powersgd:RANK (RANK >= 1). Throws InputError naming --compress otherwise.
Compression parse_compression(const std::string& text);
// The spelling parse_compression reads ("topk:0.01").
std::string to_string(const Compression& c);
// --ddp sharded (ZeRO-1) reduce-scatters each bucket: throws InputError
// unless `compress` is none, fp16 or bf16 (top-k and PowerSGD send something
// other than the gradient, which a reduce-scatter cannot sum).
void check_sharded_compression(const Compression& compress);
// For fp16/bf16 (is_half()): the rounding format and the collective's element type.
HalfFormat half_format(const Compression& c);
comm::DataType wire_type(const Compression& c);

}  // namespace mddp::ddp
