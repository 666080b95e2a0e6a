// Top-k sparsification with error feedback (--compress topk:RATIO; Stich et
// al. 2018, Lin et al. 2018 "Deep Gradient Compression"). Words: a bucket's
// region holds n gradient entries; k = ceil(RATIO * n); the residual e is
// what this rank has not sent yet. Per step, on every rank:
//
//   a = g + e                      the gradient plus what is still owed
//   S = the k indices of largest |a|   (ties: lowest index; NaN counts as largest)
//   send (S, a[S]); e = a with a[S] set to 0    so a = sent + e exactly
//   all-gather every rank's (S, a[S]) and sum them here, in rank order, then
//   divide by n ranks: every rank computes the same average.
//
// Cost: each rank sends k values and k int32 indices, 8k bytes, where the
// fp32 all-reduce's message is 4n: a payload ratio of n / 2k (50x at 1 %).
// But an all-gather's traffic grows with the ranks: (W-1) 8k bytes per rank
// against the ring all-reduce's 2(W-1)/W 4n, so the traffic ratio is
// n / (W k): 25x at 1 % on 4 ranks, and at RATIO >= 1/W top-k sends more
// than the dense all-reduce. CPU only: the selection is std::nth_element,
// among the entries above a sampled threshold (Note [Sampled threshold]).
#pragma once

#include <cstdint>
#include <vector>

#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

// k = ceil(ratio * n), at least 1 and at most n (n > 0).
int64_t top_k_count(int64_t n, double ratio);

// The k indices of the largest |x[i]| (NaN as +inf; ties to the lower
// index), ascending, into `out` (resized to k). `scratch` is reused memory.
void select_top_k(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out,
                  std::vector<float>& scratch);

class TopKUnit : public SyncUnit {
 public:
  TopKUnit(int index, tensor::Tensor region, double ratio);
  void launch(comm::ProcessGroup& comm) override;
  void complete(SyncStats& stats) override;
  int64_t k() const { return k_; }
  const tensor::Tensor& residual() const { return residual_; }  // e, after complete() (tests)

 private:
  int index_;
  tensor::Tensor region_;
  tensor::Tensor residual_;  // e, [n]
  int64_t k_;
  std::vector<int32_t> picked_;
  std::vector<float> scratch_;
  std::vector<float> send_;      // [k int32 index bits | k values]: 2k words
  std::vector<float> gathered_;  // every rank's send_, in rank order
  Round round_;
};

}  // namespace mddp::ddp
