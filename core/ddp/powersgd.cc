#include "core/ddp/powersgd.h"

#include <algorithm>
#include <cmath>

#include "core/common/check.h"
#include "core/common/rng.h"
#include "core/tensor/ops.h"
#include "core/tensor/precision.h"

namespace mddp::ddp {
namespace {

// The first Q of matrix `j` of bucket `index`: the same numbers on every rank.
constexpr uint64_t kInitialQSeed = 0x9057'5ed0'0000'0000ULL;

}  // namespace

void orthonormalize_columns(float* a, int64_t rows, int64_t cols) {
  const auto at = [&](int64_t i, int64_t j) -> float& { return a[i * cols + j]; };
  for (int64_t j = 0; j < cols; ++j) {
    // Modified Gram-Schmidt (each projection against the updated column),
    // twice: one pass leaves errors that grow with the conditioning, and a
    // gradient's P is often nearly rank-deficient (its rank is at most the
    // batch); a second pass restores orthogonality ("twice is enough").
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t p = 0; p < j; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += static_cast<double>(at(i, p)) * at(i, j);
        for (int64_t i = 0; i < rows; ++i) at(i, j) -= static_cast<float>(dot * at(i, p));
      }
    double norm2 = 0;
    for (int64_t i = 0; i < rows; ++i) norm2 += static_cast<double>(at(i, j)) * at(i, j);
    const double inv = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
    for (int64_t i = 0; i < rows; ++i) at(i, j) = static_cast<float>(at(i, j) * inv);
  }
}

PowerSgdUnit::PowerSgdUnit(int index, tensor::Tensor region, std::vector<tensor::Tensor> parts,
                           const Compression& c)
    : index_(index), region_(std::move(region)) {
  MDDP_CHECK(c.rank >= 1, "powersgd rank ", c.rank);
  int64_t dense_total = 0, p_total = 0, q_total = 0, covered = 0;
  for (const tensor::Tensor& part : parts) {
    MDDP_CHECK(part.shares_storage(region_), "a PowerSGD part is not a view of its region");
    const int64_t offset = part.data() - region_.data();
    MDDP_CHECK(offset >= 0 && offset + part.numel() <= region_.numel(), "part outside its region");
    covered += part.numel();
    const int64_t n = part.ndim() >= 2 ? part.dim(0) : 0;
    const int64_t m = n > 0 ? part.numel() / n : 0;
    const int64_t r = std::min<int64_t>({c.rank, n, m});
    const bool compress =
        n > 0 && m > 0 &&
        static_cast<double>((n + m) * r) * c.min_compression_rate < static_cast<double>(n * m);
    if (compress) {
      matrices_.push_back({offset, n, m, r, p_total, q_total});
      p_total += n * r;
      q_total += m * r;
    } else {
      dense_.push_back({offset, part.numel(), dense_total});
      dense_total += part.numel();
    }
  }
  MDDP_CHECK(covered == region_.numel(), "PowerSGD parts cover ", covered, " of ", region_.numel(),
             " entries");
  for (Matrix& x : matrices_) x.p_offset += dense_total;
  residual_ = tensor::Tensor::zeros({region_.numel()});
  p_ = tensor::Tensor::zeros({dense_total + p_total});
  if (q_total > 0) q_ = tensor::Tensor::zeros({q_total});
  for (std::size_t j = 0; j < matrices_.size(); ++j) {
    const Matrix& x = matrices_[j];
    Rng rng(kInitialQSeed + (static_cast<uint64_t>(index_) << 20) + j);
    float* q = q_.data() + x.q_offset;
    for (int64_t i = 0; i < x.m * x.r; ++i) q[i] = rng.normal();
    orthonormalize_columns(q, x.m, x.r);
  }
}

void PowerSgdUnit::launch(comm::ProcessGroup& comm) {
  const tensor::PrecisionScope fp32(
      tensor::Precision::kFp32);           // the factors in fp32 (Note [Autocast])
  tensor::axpy(1.0f, residual_, region_);  // M = g + e
  tensor::copy(region_, residual_);        // keep M: e is computed from it at the end
  for (const Dense& d : dense_)
    std::copy(region_.data() + d.offset, region_.data() + d.offset + d.numel,
              p_.data() + d.p_offset);
  for (const Matrix& x : matrices_) {
    tensor::Tensor p = p_of(x);
    tensor::gemm(false, false, 1.0f, matrix_of(region_, x), q_of(x), 0.0f, p);  // P = M Q
  }
  p_round_ = begin_round(index_, 0, SpanOp::kAllReduce, p_.bytes(), region_.bytes(), comm);
  launched_ = true;
  p_round_.work =
      comm.all_reduce(p_.data(), p_.numel(), comm::DataType::kFloat32, comm::ReduceOp::kAvg);
}

void PowerSgdUnit::advance(comm::ProcessGroup& comm) {
  const tensor::PrecisionScope fp32(
      tensor::Precision::kFp32);  // the factors in fp32 (Note [Autocast])
  wait_round(p_round_);
  for (const Dense& d : dense_)
    std::copy(p_.data() + d.p_offset, p_.data() + d.p_offset + d.numel, region_.data() + d.offset);
  if (matrices_.empty()) return;
  for (const Matrix& x : matrices_) {
    tensor::Tensor p = p_of(x), q = q_of(x);
    orthonormalize_columns(p.data(), x.n, x.r);
    tensor::gemm(true, false, 1.0f, matrix_of(residual_, x), p, 0.0f, q);  // Q = M^T P
  }
  q_round_ = begin_round(index_, 1, SpanOp::kAllReduce, q_.bytes(), 0, comm);
  q_round_.work =
      comm.all_reduce(q_.data(), q_.numel(), comm::DataType::kFloat32, comm::ReduceOp::kAvg);
}

void PowerSgdUnit::complete(SyncStats& stats) {
  const tensor::PrecisionScope fp32(
      tensor::Precision::kFp32);  // the factors in fp32 (Note [Autocast])
  MDDP_CHECK(p_round_.span.end_ns != 0 || p_round_.work == nullptr, "PowerSGD bucket ", index_,
             " completed without advance()");
  report_round(p_round_, stats);
  if (!matrices_.empty()) {
    wait_round(q_round_);
    for (const Matrix& x : matrices_) {
      tensor::Tensor m = matrix_of(region_, x);
      tensor::gemm(false, true, 1.0f, p_of(x), q_of(x), 0.0f,
                   m);  // the average's approximation P Q^T
    }
    report_round(q_round_, stats);
  }
  tensor::axpy(-1.0f, region_, residual_);  // e = M - what the average carried
  launched_ = false;
}

}  // namespace mddp::ddp
