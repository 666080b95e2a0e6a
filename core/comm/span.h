// CommSpan: one collective's life on the timeline of a step, as a DDP
// strategy ran it (core/ddp records them in SyncStats; core/perf's metrics,
// timeline and analysis read them). It lives here, below both, so that
// core/perf never depends on core/ddp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/algo_step.h"

namespace mddp::comm {

// The collective a span ran: an all-reduce, (top-k, or ZeRO-1's parameters)
// an all-gather, or (ZeRO-1's gradients) a reduce-scatter.
enum class SpanOp { kAllReduce, kAllGather, kReduceScatter };
const char* to_string(SpanOp op);            // "all_reduce", "all_gather", "reduce_scatter"
SpanOp parse_span_op(const std::string& s);  // throws InputError naming the spelling

// One collective's life on the timeline (steady-clock ns; 0 = did not happen).
// Bytes, Note [Wire bytes]: `bytes` is the message this rank hands to the
// collective (an all-reduce's buffer, an all-gather's contribution);
// `grad_bytes` the fp32 gradients it stands for (so grad_bytes / bytes is
// the compression ratio); `sent_bytes` what this rank really sent, summed
// from the algorithm's steps (NCCL, whose steps are hidden: the ring's
// 2(n-1)/n of an all-reduce's buffer, (n-1)/n of a reduce-scatter's, n-1
// times an all-gather's part).
struct CommSpan {
  int index = 0;                     // bucket index (bucketed) or parameter index
  std::size_t bytes = 0;             // the message (see above)
  int64_t ready_ns = 0;              // last gradient of the unit became ready (GPU: computed)
  int64_t launch_ns = 0;             // handed to the communicator
  int64_t start_ns = 0;              // progress thread (GPU: communication stream) started it
  int64_t end_ns = 0;                // progress thread (GPU: communication stream) finished it
  std::vector<AlgoStep> steps = {};  // the algorithm's steps on this rank (CPU backend)
  SpanOp op = SpanOp::kAllReduce;
  int round = 0;               // the unit's collectives in order: PowerSGD's P is 0, its Q 1
  std::size_t grad_bytes = 0;  // fp32 gradient bytes this collective carries (0: a second round)
  std::size_t sent_bytes = 0;  // bytes this rank sent (see above)
};

}  // namespace mddp::comm
