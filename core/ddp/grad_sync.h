// How gradients become the average over ranks. Four strategies, the course's
// steps (docs/naive.md, docs/hooks.md, docs/bucketing.md, docs/ddp.md):
//
//   naive     after backward, all-reduce every gradient, one at a time
//             (NaiveSync, naive_sync.cc);
//   hooked    launch one asynchronous all-reduce per parameter from its
//             grad-ready hook, wait for all before the optimiser (HookedSync,
//             hooked_sync.cc);
//   bucketed  gradients live in flat bucket buffers; a bucket's all-reduce is
//             launched the moment its last gradient is ready (Reducer,
//             reducer.cc) — the real thing, like PyTorch's DDP;
//   sharded   ZeRO-1: the buckets of bucketed mode, each reduce-scattered
//             instead of all-reduced, so each rank holds the average of
//             its 1/n shard only; the optimiser updates that shard and
//             all-gathers the parameters (ShardedSync, sharded_sync.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/comm/span.h"
#include "core/ddp/bucket_assignment.h"
#include "core/ddp/compression.h"
#include "core/nn/module.h"

namespace mddp::ddp {

enum class Mode { kNaive, kHooked, kBucketed, kSharded };
Mode parse_mode(const std::string& s);  // naive | hooked | bucketed | sharded
const char* to_string(Mode m);

// A collective's span on the timeline (core/comm/span.h): the sync
// strategies record them, core/perf reads them.
using comm::CommSpan;
using comm::SpanOp;

// What one synchronisation cost (sums over its spans).
struct SyncStats {
  double exposed_ms = 0;       // the training thread waited this long after backward
  double total_ms = 0;         // sum of the collectives' spans (progress thread or comm stream)
  std::size_t bytes = 0;       // messages handed to collectives
  std::size_t grad_bytes = 0;  // fp32 gradient bytes synchronised
  std::size_t sent_bytes = 0;  // bytes this rank sent
  std::vector<CommSpan> spans;
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  // From the grad-ready hook, on the training thread, as each gradient is final.
  virtual void on_grad_ready(nn::Parameter& p) = 0;
  // After backward: blocks until every gradient holds the average over ranks.
  virtual void finish() = 0;
  const SyncStats& stats() const { return stats_; }

 protected:
  SyncStats stats_;
};

struct SyncOptions {
  Mode mode = Mode::kBucketed;
  double bucket_mb = 25.0;       // cap of every bucket but the first (MiB)
  double first_bucket_mb = 1.0;  // cap of bucket 0, the first ready
  Compression compress = {};
};

// A bucket cap of `mb` MiB in bytes. Throws InputError naming `flag` unless
// mb is a positive number; a cap over 1 TiB is 1 TiB (one bucket either
// way), so that a huge --bucket-mb cannot overflow the conversion.
std::size_t bucket_cap_bytes(double mb, const char* flag);

// Builds the strategy for `params` (registration order). Bucketed mode
// re-points each parameter's grad to a view into its bucket's flat buffer.
std::unique_ptr<GradSync> make_grad_sync(const SyncOptions& options,
                                         std::vector<nn::Parameter*> params,
                                         comm::ProcessGroup& comm);
// Bucketed mode with the given rules (bucket_assignment.h; the course's Lab 7).
std::unique_ptr<GradSync> make_bucketed_sync(const SyncOptions& options,
                                             std::vector<nn::Parameter*> params,
                                             comm::ProcessGroup& comm, BucketRules rules);

}  // namespace mddp::ddp
