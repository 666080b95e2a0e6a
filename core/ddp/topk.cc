#include "core/ddp/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {

int64_t top_k_count(int64_t n, double ratio) {
  const auto k = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<int64_t>(k, 1, n);
}

namespace {

float magnitude(float v) {
  return std::isnan(v) ? std::numeric_limits<float>::infinity() : std::fabs(v);
}

// The k largest magnitudes among the entries `candidates` names (ascending
// indices, every entry of magnitude >= the k-th largest among them): the
// k-th largest is the threshold; take everything above it, then as many
// entries equal to it as are still missing, lowest index first.
void pick_among(const float* x, const std::vector<int32_t>& candidates, int64_t k,
                std::vector<int32_t>& out, std::vector<float>& scratch) {
  scratch.resize(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) scratch[j] = magnitude(x[candidates[j]]);
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(),
                   std::greater<float>());
  const float threshold = scratch[k - 1];
  int64_t above = 0;
  for (int32_t i : candidates) above += magnitude(x[i]) > threshold;
  int64_t ties = k - above;
  for (int32_t i : candidates) {
    const float m = magnitude(x[i]);
    if (m > threshold || (m == threshold && ties-- > 0)) out.push_back(i);
  }
}

// Note [Sampled threshold]. std::nth_element over a whole bucket costs
// milliseconds per step (5.5 ms for 270k entries here), more than the
// all-gather it saves on a fast link. So: estimate the threshold from a
// strided sample of kSample entries, at twice the expected share for margin;
// keep the entries at or above it (one pass) and select among them. The
// result is exactly the full selection's whenever at least k entries pass
// (the k-th largest then passes too, and all that matter are candidates);
// when the sample misjudged and fewer pass, select over everything.
constexpr int64_t kSample = 4096;

}  // namespace

void select_top_k(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out,
                  std::vector<float>& scratch) {
  MDDP_CHECK(k >= 1 && k <= n, "top-k of ", k, " from ", n);
  out.clear();
  std::vector<int32_t> candidates;
  if (n >= 4 * kSample && 4 * k <= n) {
    const int64_t stride = n / kSample;
    scratch.resize(static_cast<std::size_t>(kSample));
    for (int64_t j = 0; j < kSample; ++j) scratch[j] = magnitude(x[j * stride]);
    const int64_t q = std::min<int64_t>(kSample - 1, (2 * k * kSample + n - 1) / n);
    std::nth_element(scratch.begin(), scratch.begin() + q, scratch.end(), std::greater<float>());
    const float estimate = scratch[q];
    for (int64_t i = 0; i < n; ++i)
      if (magnitude(x[i]) >= estimate) candidates.push_back(static_cast<int32_t>(i));
  }
  if (static_cast<int64_t>(candidates.size()) < k) {  // the full selection
    candidates.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) candidates[i] = static_cast<int32_t>(i);
  }
  if (static_cast<int64_t>(candidates.size()) == k) {
    out = std::move(candidates);
  } else {
    pick_among(x, candidates, k, out, scratch);
  }
  MDDP_CHECK(static_cast<int64_t>(out.size()) == k, "top-k picked ", out.size(), " of ", k);
}

TopKUnit::TopKUnit(int index, tensor::Tensor region, double ratio)
    : index_(index), region_(std::move(region)), k_(top_k_count(region_.numel(), ratio)) {
  MDDP_CHECK(region_.numel() <= std::numeric_limits<int32_t>::max(), "a top-k region of ",
             region_.numel(), " entries does not fit int32 indices");
  residual_ = tensor::Tensor::zeros({region_.numel()});
  send_.resize(static_cast<std::size_t>(2 * k_));
}

void TopKUnit::launch(comm::ProcessGroup& comm) {
  float* a = region_.data();
  float* e = residual_.data();
  const int64_t n = region_.numel();
  tensor::axpy(1.0f, residual_, region_);  // a = g + e
  select_top_k(a, n, k_, picked_, scratch_);
  std::copy(a, a + n, e);  // e = a, less what is sent:
  for (int64_t j = 0; j < k_; ++j) {
    const int32_t i = picked_[j];
    std::memcpy(&send_[j], &i,
                sizeof i);  // an all-gather copies bytes: the index travels as its bits
    send_[k_ + j] = a[i];
    e[i] = 0.0f;
  }
  gathered_.resize(send_.size() * static_cast<std::size_t>(comm.size()));
  round_ = begin_round(index_, 0, SpanOp::kAllGather, send_.size() * sizeof(float), region_.bytes(),
                       comm);
  launched_ = true;
  round_.work = comm.all_gather(send_.data(), gathered_.data(), 2 * k_, comm::DataType::kFloat32);
}

void TopKUnit::complete(SyncStats& stats) {
  wait_round(round_);
  const int world = round_.world;
  float* out = region_.data();
  const int64_t n = region_.numel();
  std::fill(out, out + n, 0.0f);
  for (int r = 0; r < world; ++r) {  // every rank sums in the same order: identical results
    const float* part = gathered_.data() + static_cast<std::size_t>(r) * send_.size();
    for (int64_t j = 0; j < k_; ++j) {
      int32_t i;
      std::memcpy(&i, &part[j], sizeof i);
      if (i < 0 || i >= n)
        throw comm::CommError(str("top-k bucket ", index_, ": rank ", r, " sent index ", i,
                                  " outside the bucket's ", n,
                                  " entries (ranks built different buckets?)"));
      out[i] += part[k_ + j];
    }
  }
  const auto ranks = static_cast<float>(world);
  for (int64_t i = 0; i < n; ++i) out[i] /= ranks;  // divided like the all-reduce's average
  report_round(round_, stats);
  launched_ = false;
}

}  // namespace mddp::ddp
