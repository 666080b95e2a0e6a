// How gradients become the average over ranks. Three strategies, the course's
// three steps (docs/naive.md, docs/hooks.md, docs/bucketing.md):
//
//   naive     after backward, all-reduce every gradient, one at a time
//             (NaiveSync, naive_sync.cc);
//   hooked    launch one asynchronous all-reduce per parameter from its
//             grad-ready hook, wait for all before the optimiser (HookedSync,
//             hooked_sync.cc);
//   bucketed  gradients live in flat bucket buffers; a bucket's all-reduce is
//             launched the moment its last gradient is ready (Reducer,
//             reducer.cc) — the real thing, like PyTorch's DDP.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/ddp/bucket_assignment.h"
#include "core/nn/module.h"

namespace mddp::ddp {

enum class Mode { kNaive, kHooked, kBucketed };
enum class Compression { kNone, kFp16, kBf16 };
Mode parse_mode(const std::string& s);                // naive | hooked | bucketed
Compression parse_compression(const std::string& s);  // none | fp16 | bf16
const char* to_string(Mode m);
const char* to_string(Compression c);

// One all-reduce's life on the timeline (steady-clock ns; 0 = did not happen).
struct CommSpan {
  int index = 0;            // bucket index (bucketed) or parameter index
  std::size_t bytes = 0;    // bytes on the wire
  int64_t ready_ns = 0;     // last gradient of the unit became ready (GPU: computed)
  int64_t launch_ns = 0;    // handed to the communicator
  int64_t start_ns = 0;     // progress thread (GPU: communication stream) started it
  int64_t end_ns = 0;       // progress thread (GPU: communication stream) finished it
  std::vector<comm::AlgoStep> steps = {};  // the algorithm's steps on this rank (CPU backend)
};

// What one synchronisation cost.
struct SyncStats {
  double exposed_ms = 0;  // the training thread waited this long after backward
  double total_ms = 0;    // sum of the all-reduce spans (progress thread or comm stream)
  std::size_t bytes = 0;  // bytes all-reduced (on the wire)
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
  Compression compress = Compression::kNone;
};

// Builds the strategy for `params` (registration order). Bucketed mode
// re-points each parameter's grad to a view into its bucket's flat buffer.
std::unique_ptr<GradSync> make_grad_sync(const SyncOptions& options, std::vector<nn::Parameter*> params,
                                         comm::ProcessGroup& comm);
// Bucketed mode with the given rules (bucket_assignment.h; the course's Lab 7).
std::unique_ptr<GradSync> make_bucketed_sync(const SyncOptions& options, std::vector<nn::Parameter*> params,
                                             comm::ProcessGroup& comm, BucketRules rules);

}  // namespace mddp::ddp
