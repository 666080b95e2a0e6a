// CPU kernels on raw, contiguous float arrays. Shapes are checked by the
// callers in core/tensor/ops.cc; these only compute. Single-threaded unless
// set_num_threads() asked for more (gemm honours it through oneDNN's OpenMP).
#pragma once

#include <cstdint>
#include <string>

#include "core/common/half.h"
#include "core/tensor/head_dims.h"

namespace mddp::tensor::cpu {

// The one place the CPU GEMM is chosen (gemm.cc: oneDNN with AVX-512; with
// AVX2 only and one compute thread, oneDNN for small GEMMs and OpenBLAS for
// big ones; with more threads, OpenBLAS).
enum class GemmBackend { kOneDnn, kOpenBlas };
GemmBackend gemm_backend(int64_t m, int64_t n, int64_t k);  // the library an m×n×k GEMM goes to
const char* gemm_backend_name(GemmBackend b);
std::string gemm_policy();  // the rule, in words (for reports)
void set_blas_threads(int n);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);
// The same with a and b rounded to `format` (gemm_half.cc: oneDNN's bf16
// matmul where native_bf16_gemm(), else rounded inputs through gemm()).
void gemm_half(HalfFormat format, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, const float* b, float beta, float* c);
bool native_bf16_gemm();             // AVX-512 BF16 here and MICRODDP_BF16_GEMM is not "emulate"
const char* bf16_fallback_reason();  // why not, in a few words

void bias_add(float* y, const float* bias, int64_t n, int64_t c, int64_t inner);
void bias_grad(const float* dy, float* dbias, int64_t n, int64_t c, int64_t inner);
void relu_forward(const float* x, float* y, int64_t n);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n);

// One image: x [C, H, W] -> col [C*K*K, Ho*Wo]; col2im adds back into dx [C, H, W] (zeroed by
// caller).
void im2col(const float* x, int64_t c, int64_t h, int64_t w, int k, int pad, float* col);
void col2im(const float* col, int64_t c, int64_t h, int64_t w, int k, int pad, float* dx);
void maxpool2d_forward(const float* x, int64_t nc, int64_t h, int64_t w, int k, float* y);
void maxpool2d_backward(const float* x, const float* dy, int64_t nc, int64_t h, int64_t w, int k,
                        float* dx);

float softmax_xent_forward(const float* logits, const float* labels, int64_t n, int64_t classes,
                           float* probs);
void softmax_xent_backward(const float* probs, const float* labels, int64_t n, int64_t classes,
                           float* dlogits);
int64_t count_correct(const float* logits, const float* labels, int64_t n, int64_t classes);
float mse_forward(const float* pred, const float* target, int64_t n);
void mse_backward(const float* pred, const float* target, int64_t n, float* dpred);

void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool first_step);
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step);
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t step);
double sum_squares(const float* x, int64_t n);

// The GPT's kernels (transformer.cc). x [N, C] rows for the embedding and LayerNorm.
void embedding_forward(const float* ids, const float* table, int64_t n, int64_t c, float* y);
void embedding_backward(const float* ids, const float* dy, int64_t n, int64_t c, float* dtable);
void layernorm_forward(const float* x, const float* w, const float* b, int64_t n, int64_t c,
                       float eps, float* y, float* mean, float* rstd);
void layernorm_backward(const float* x, const float* w, const float* mean, const float* rstd,
                        const float* dy, int64_t n, int64_t c, float* dx, float* dw, float* db);
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
void split_heads(const float* x, const HeadDims& d, float* heads);
void merge_heads(const float* heads, const HeadDims& d, float* x);
// n matrices of [t, t]. Row i sees columns 0..i + ahead: ahead is 0 (causal)
// but for the planted bug causal_mask_off_by_one (core/common/test_mutation.h).
void causal_softmax_forward(const float* scores, int64_t n, int64_t t, float* probs,
                            int64_t ahead = 0);
void causal_softmax_backward(const float* probs, const float* dprobs, int64_t n, int64_t t,
                             float* dscores, int64_t ahead = 0);
void dropout(const float* x, int64_t n, float p, uint64_t seed, float* y);

void fill(float* x, int64_t n, float value);
void scale(float* x, int64_t n, float alpha);
void axpy(float alpha, const float* x, float* y, int64_t n);
void round_to_half(const float* x, int64_t n, HalfFormat format, uint16_t* bits);
void widen_from_half(const uint16_t* bits, int64_t n, HalfFormat format, float* x);

}  // namespace mddp::tensor::cpu
