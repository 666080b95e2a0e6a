// The few ops training needs. Each takes tensors, checks shapes and devices,
// and dispatches to the backend of the tensors' device (cpu/ here; cuda/ when
// built with CUDA). Outputs are preallocated by the caller: no op allocates.
// Shapes use N batch, C/O channels, H/W height/width, K kernel size.
#pragma once

#include <cstdint>

#include "core/common/half.h"
#include "core/tensor/tensor.h"

namespace mddp::tensor {

// ---- threads ---------------------------------------------------------------
// Compute threads for this process's ops (the trainer sets --threads, default 1:
// one rank per core; without a call, OpenMP uses every core).
void set_num_threads(int n);
int num_threads();
// Which library computes an m×n×k gemm on the CPU ("oneDNN dnnl_sgemm" or
// "OpenBLAS cblas_sgemm"; chosen per CPU and shape in cpu/gemm.cc).
const char* gemm_backend_name(int64_t m, int64_t n, int64_t k);

// ---- BLAS-like -------------------------------------------------------------
// c = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T. All row-major 2-D.
// a: [m, k] ([k, m] if trans_a), b: [k, n] ([n, k] if trans_b), c: [m, n].
void gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c);
void fill(Tensor& x, float value);
void copy(const Tensor& src, Tensor& dst);           // same numel
void scale(Tensor& x, float alpha);                  // x *= alpha
void axpy(float alpha, const Tensor& x, Tensor& y);  // y += alpha * x

// ---- 16-bit rounding: the gradient-compression hook ----------------------
// bits[i] = x[i] rounded to the nearest fp16 or bf16, ties to even
// (core/common/half.h). `bits` holds numel(x) 16-bit values on x's device.
void round_to_half(const Tensor& x, HalfFormat format, uint16_t* bits);
// x[i] = the fp32 value of bits[i] (exact: every 16-bit value is an fp32).
void widen_from_half(const uint16_t* bits, HalfFormat format, Tensor& x);

// ---- layers ----------------------------------------------------------------
// y[n, c, ...] += bias[c] for y of shape [N, C] or [N, C, H, W].
void bias_add(Tensor& y, const Tensor& bias);
// dbias[c] += sum over n (and h, w) of dy[n, c, ...].
void bias_grad(const Tensor& dy, Tensor& dbias);
void relu_forward(const Tensor& x, Tensor& y);
// dx = dy where y > 0, else 0 (y is the forward output).
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

// Convolution with stride 1 and zero padding `pad`, by im2col + gemm.
// x: [N, C, H, W], w: [O, C, K, K], b: [O], y: [N, O, H+2p-K+1, W+2p-K+1],
// col: workspace [C*K*K, Ho*Wo].
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, int pad, Tensor& col,
                    Tensor& y);
// Accumulates dw [O, C, K, K] and db [O] (the parameter gradients, ready first).
void conv2d_backward_params(const Tensor& x, const Tensor& dy, int pad, Tensor& col, Tensor& dw,
                            Tensor& db);
// Overwrites dx [N, C, H, W] with the gradient of the input.
void conv2d_backward_input(const Tensor& w, const Tensor& dy, int pad, Tensor& col, Tensor& dx);
// Max pooling with window = stride = `k` (floor mode). x: [N, C, H, W], y: [N, C, H/k, W/k].
void maxpool2d_forward(const Tensor& x, int k, Tensor& y);
// Routes dy to the first maximum of each window (recomputed from x); dx is overwritten.
void maxpool2d_backward(const Tensor& x, const Tensor& dy, int k, Tensor& dx);

// ---- losses (mean over the batch) -----------------------------------------
// logits: [N, classes], labels: [N] holding class indices as floats (exact to 2^24).
// Returns the mean cross-entropy; stores softmax probabilities in `probs` [N, classes].
float softmax_xent_forward(const Tensor& logits, const Tensor& labels, Tensor& probs);
// dlogits = (probs - onehot(labels)) / N. `labels_checked`: the caller's
// softmax_xent_forward already checked these labels, so a GPU skips checking
// them again (each check is a host wait to read the verdict back).
void softmax_xent_backward(const Tensor& probs, const Tensor& labels, Tensor& dlogits,
                           bool labels_checked = false);
// Number of rows whose arg-max equals the label.
int64_t count_correct(const Tensor& logits, const Tensor& labels);
// Mean over all elements of (pred - target)^2, like torch.nn.MSELoss().
float mse_forward(const Tensor& pred, const Tensor& target);
// dpred = 2 (pred - target) / numel
void mse_backward(const Tensor& pred, const Tensor& target, Tensor& dpred);

// ---- optimisers: one fused pass over each parameter -----------------------
// PyTorch's SGD: g = grad + wd*p; buf = momentum*buf + g (buf = g on step 1); p -= lr*buf.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, float lr, float momentum,
                float weight_decay, bool first_step);
// PyTorch's Adam (L2 weight decay, bias-corrected); `step` counts from 1.
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step);
// PyTorch's AdamW: p *= 1 - lr * weight_decay (decoupled decay), then Adam with no L2 term.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step);
// out[0] += the sum of x's squared elements (summed in double; out has one
// element): gradient clipping's norm, accumulated over the parameters.
void sum_squares(const Tensor& x, Tensor& out);

// ---- the GPT's ops (core/nn/gpt.h) ----------------------------------------
// gemm on each matrix of a batch: c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i],
// a, b, c 3-D [batch, ...] with gemm's shapes after the batch dimension.
void gemm_batched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                  float beta, Tensor& c);
// y[n, :] = table[ids[n], :]: ids holds N token ids as floats (any shape),
// table [V, C], y [N, C]. Ids must be in [0, V) (checked on the CPU; a GPU
// writes NaN rows for bad ones, which the loss then reports).
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& y);
// dtable[ids[n], :] += dy[n, :], in order of n (no atomics: deterministic).
void embedding_backward(const Tensor& ids, const Tensor& dy, Tensor& dtable);
// LayerNorm over the rows of x [N, C]: y = (x - mean) * rstd * weight + bias,
// rstd = 1 / sqrt(var + eps), var the biased variance (PyTorch's);
// mean [N] and rstd [N] are saved for the backward.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                       Tensor& y, Tensor& mean, Tensor& rstd);
// dx is overwritten; dweight and dbias accumulate.
void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dweight,
                        Tensor& dbias);
// GPT-2's GELU, the tanh approximation: y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);  // dx = gelu'(x) dy
// The attention's layouts (head_dims.h): x [B, T, P*H*D] -> heads [P, B, H, T, D]
// (P, H, D read from heads' shape), and back.
void split_heads(const Tensor& x, Tensor& heads);
void merge_heads(const Tensor& heads, Tensor& x);
// Causal softmax of scores [N, T, T]: row i of each matrix is the softmax of
// its first i + 1 entries, then zeros. probs may be scores (in place).
void causal_softmax_forward(const Tensor& scores, Tensor& probs);
// dscores = probs * (dprobs - rowsum(probs * dprobs)); dscores may be dprobs.
void causal_softmax_backward(const Tensor& probs, const Tensor& dprobs, Tensor& dscores);
// Inverted dropout: y[i] = x[i] / (1 - p), or 0 with probability p, the mask
// a pure function of (seed, i) (dropout_mask.h). Its own backward: the same
// call on dy gives dx.
void dropout(const Tensor& x, float p, uint64_t seed, Tensor& y);

}  // namespace mddp::tensor
