// Note [Averaging in 16 bits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// NCCL's ncclAvg multiplies every input by 1/n *in the data type* before
// summing. In fp16/bf16, 1/n is rounded unless n is a power of two: bf16 has
// 8 significant bits, so 1/3 becomes 0.333984 and every average comes out
// 1.00195x too large — a bias, the same sign at every step, which momentum
// and Adam integrate. microddp's 16-bit average is instead NCCL's 16-bit sum
// followed by one pass that widens each sum to fp32, multiplies by 1/n in
// fp32 and rounds once: the only error left is that final rounding (and the
// sum's own), unbiased round-to-nearest-even. (The CPU transports already
// accumulate 16-bit wire values in fp32 and divide there.) A sum can reach
// n times the largest gradient: fp16 overflows above 65504, which gradients
// of a trainable model stay far below; bf16 has fp32's range.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mddp::comm::nccl {

// x[i] = round16(float(x[i]) * factor) for `count` fp16 (or bf16) values on
// the GPU, queued on `stream` without waiting.
void scale_16bit(void* x, int64_t count, bool bf16, float factor, cudaStream_t stream);

}  // namespace mddp::comm::nccl
