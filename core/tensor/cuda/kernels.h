// The CUDA backend of ops.h, on raw device pointers (the mirror of
// cpu/kernels.h; no CUDA headers, so ops.cc can include it). Shapes are
// checked by ops.cc. Every call runs on `device`'s compute stream
// (See Note [One compute stream] in context.h) and returns without waiting, except the
// ones that return a value to the host.
#pragma once

#include <cstdint>

#include "core/tensor/conv_loops.h"
#include "core/tensor/head_dims.h"
#include "core/tensor/precision.h"

namespace mddp::tensor::cuda {

// cuBLAS GEMM on fp32 buffers, row-major like ops.h: SGEMM for kFp32; for
// kBf16/kFp16 cublasGemmEx with the inputs rounded to 16 bits on the tensor
// cores and fp32 accumulation (Note [Autocast] in ../precision.h).
void gemm(int device, Precision precision, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, const float* a, const float* b, float beta, float* c);

void fill(int device, float* x, int64_t n, float value);
void copy_on_device(int device, const float* src, float* dst, int64_t n);
void scale(int device, float* x, int64_t n, float alpha);
void axpy(int device, float alpha, const float* x, float* y, int64_t n);
// 16-bit values as raw bits: bf16 if `bf16`, else fp16 (nvcc builds C++17,
// so core/common/half.h and its HalfFormat stay out of here).
void round_to_half(int device, const float* x, int64_t n, bool bf16, uint16_t* bits);
void widen_from_half(int device, const uint16_t* bits, int64_t n, bool bf16, float* x);

void bias_add(int device, float* y, const float* bias, int64_t n, int64_t c, int64_t inner);
void bias_grad(int device, const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner);
void relu_forward(int device, const float* x, float* y, int64_t n);
void relu_backward(int device, const float* y, const float* dy, float* dx, int64_t n);

void conv2d_forward(int device, const conv::Dims& d, const float* x, const float* w, const float* b,
                    float* col, float* y);
void conv2d_backward_params(int device, const conv::Dims& d, const float* x, const float* dy,
                            float* col, float* dw, float* db);
void conv2d_backward_input(int device, const conv::Dims& d, const float* w, const float* dy,
                           float* col, float* dx);
void maxpool2d_forward(int device, const float* x, int64_t nc, int64_t h, int64_t w, int k,
                       float* y);
void maxpool2d_backward(int device, const float* x, const float* dy, int64_t nc, int64_t h,
                        int64_t w, int k, float* dx);

// The label ops check the labels on the GPU (the host cannot read them) and
// set bad_row to the first row whose label is not a class index, else -1;
// they wait for the stream to learn it.
float softmax_xent_forward(int device, const float* logits, const float* labels, int64_t n,
                           int64_t classes, float* probs, int64_t& bad_row);
// check_labels false: the labels were checked (by the forward); nothing is read back.
void softmax_xent_backward(int device, const float* probs, const float* labels, int64_t n,
                           int64_t classes, float* dlogits, bool check_labels, int64_t& bad_row);
int64_t count_correct(int device, const float* logits, const float* labels, int64_t n,
                      int64_t classes, int64_t& bad_row);
float mse_forward(int device, const float* pred, const float* target, int64_t n);
void mse_backward(int device, const float* pred, const float* target, int64_t n, float* dpred);

void sgd_update(int device, float* p, const float* g, float* buf, int64_t n, float lr,
                float momentum, float weight_decay, bool first_step);
void adam_update(int device, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                 float beta1, float beta2, float eps, float weight_decay, int64_t step);
void adamw_update(int device, float* p, const float* g, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t step);
// out[0] += sum of x[i]^2 (out: device memory, one float).
void sum_squares(int device, const float* x, int64_t n, float* out);

// The GPT's ops (transformer.cu, attention.cu): ops.h's, row-major like the CPU's.
void gemm_batched(int device, Precision precision, bool trans_a, bool trans_b, int64_t batch,
                  int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                  float beta, float* c);
void embedding_forward(int device, const float* ids, const float* table, int64_t n, int64_t c,
                       int64_t vocab, float* y);
void embedding_backward(int device, const float* ids, const float* dy, int64_t n, int64_t c,
                        int64_t vocab, float* dtable);
void layernorm_forward(int device, const float* x, const float* w, const float* b, int64_t n,
                       int64_t c, float eps, float* y, float* mean, float* rstd);
void layernorm_backward(int device, const float* x, const float* w, const float* mean,
                        const float* rstd, const float* dy, int64_t n, int64_t c, float* dx,
                        float* dw, float* db);
void gelu_forward(int device, const float* x, float* y, int64_t n);
void gelu_backward(int device, const float* x, const float* dy, float* dx, int64_t n);
void split_heads(int device, const float* x, const HeadDims& d, float* heads);
void merge_heads(int device, const float* heads, const HeadDims& d, float* x);
void causal_softmax_forward(int device, const float* scores, int64_t n, int64_t t, float* probs);
void causal_softmax_backward(int device, const float* probs, const float* dprobs, int64_t n,
                             int64_t t, float* dscores);
void dropout(int device, const float* x, int64_t n, float p, uint64_t seed, float* y);

}  // namespace mddp::tensor::cuda
