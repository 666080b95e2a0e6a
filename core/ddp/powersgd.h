// PowerSGD (Vogels, Karimireddy, Jaggi 2019), as PyTorch's powerSGD_hook
// runs it (--compress powersgd:RANK). Words: a bucket's region holds
// gradients; a matrix is a gradient of 2 or more dimensions seen as M [n, m]
// (n = its first dimension, m = the rest, like PyTorch's view(n, -1)); r =
// min(RANK, n, m); e is this rank's error-feedback residual over the whole
// region. Per step, on every rank:
//
//   M = g + e                       (the whole region)
//   P = M Q        for each compressed matrix, Q [m, r] warm-started
//   all-reduce (average) [dense parts | every P]      round 0, during backward
//   P = orthonormalise(P)           columns, Gram-Schmidt (the same on every rank)
//   Q = M^T P
//   all-reduce (average) [every Q]                    round 1, after backward
//   region = P Q^T for the matrices, the averaged dense parts elsewhere
//   e = M - region                  (what the average did not carry of M)
//
// Q stays for the next step (the warm start: one power-iteration step per
// training step refines it). Dense parts: 1-D gradients (biases), and
// matrices whose factors would not be `min_compression_rate` times smaller
// than M ((n + m) r * rate >= n m). The first Q of each matrix is random
// normal from a fixed seed (the same on every rank), orthonormalised.
//
// Per rank and step, per compressed matrix, (n + m) r floats travel instead
// of n m. Cost on the training thread: three [n, m] x r GEMMs and the
// orthonormalisation per matrix. CPU only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

// Orthonormalises the columns of `a` [rows, cols] (row-major) in place, by
// modified Gram-Schmidt with double accumulation, each column projected
// twice: column j loses its components along columns 0..j-1, then is scaled
// to unit length. A column left with nothing (norm 0, e.g. a zero gradient)
// becomes zero rather than NaN. Requires rows >= cols for a full basis.
void orthonormalize_columns(float* a, int64_t rows, int64_t cols);

class PowerSgdUnit : public SyncUnit {
 public:
  // `parts`: views of `region` with the parameters' shapes (sync_unit.h).
  PowerSgdUnit(int index, tensor::Tensor region, std::vector<tensor::Tensor> parts,
               const Compression& c);
  void launch(comm::ProcessGroup& comm) override;
  void advance(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;
  // How many of the parts are compressed as matrices (for tests).
  std::size_t compressed_matrices() const { return matrices_.size(); }
  const tensor::Tensor& residual() const { return residual_; }  // e, after complete() (tests)

 private:
  struct Matrix {
    int64_t offset, n, m, r;     // M = region[offset, offset + n m) as [n, m]
    int64_t p_offset, q_offset;  // P in p_, Q in q_
  };
  struct Dense {
    int64_t offset, numel, p_offset;  // region[offset, offset + numel) travels at p_[p_offset]
  };
  tensor::Tensor matrix_of(const tensor::Tensor& t, const Matrix& x) const {
    return t.view(x.offset, {x.n, x.m});
  }
  tensor::Tensor p_of(const Matrix& x) const { return p_.view(x.p_offset, {x.n, x.r}); }
  tensor::Tensor q_of(const Matrix& x) const { return q_.view(x.q_offset, {x.m, x.r}); }

  int index_;
  tensor::Tensor region_;
  tensor::Tensor residual_;  // e; between launch and complete it holds M
  tensor::Tensor p_;         // [dense parts | every P]
  tensor::Tensor q_;         // [every Q]: the warm start (Note [Compression state])
  std::vector<Matrix> matrices_;
  std::vector<Dense> dense_;
  Round p_round_, q_round_;
};

}  // namespace mddp::ddp
