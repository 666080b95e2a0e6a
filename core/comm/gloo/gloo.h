// The gloo backend of ProcessGroup: microddp's DDP (the same reducer,
// buckets and hooks) over gloo's collectives and TCP transport, Debian's
// libgloo (the engine behind PyTorch's CPU DDP), beside microddp's own
// (communicator.h). Chosen with --backend gloo; docs/backends.md says when.
//
//  * rendezvous: gloo's full mesh through the job's Store (the
//    coordinator's key/value store in a real run), keys under
//    "<prefix>/gloo/";
//  * the collectives run one at a time in issue order on a progress thread
//    (progress_queue.h), so bucket all-reduces overlap backward as they do
//    on microddp's own backend; fp32 reduces with gloo's kernels, fp16/bf16
//    with microddp's (widened to fp32, rounded once per hop: gloo has no
//    bf16); kAvg is a sum divided by n once at the end;
//  * every wait is bounded by the timeout (gloo's own, per operation); a
//    timeout is a TimeoutError, a peer's broken connection a PeerError, and
//    abort() fails queued work at once and the running collective with
//    AbortedError; peers blocked on this rank fail at once, but this rank's
//    own blocked wait ends only at gloo's timeout (See Note [Aborting gloo]
//    in gloo_group.cc); an exception on gloo's own device thread fails the
//    running collective, not the process (Note [gloo's device thread dies]
//    in device_thread.h).
//
// Buffers are host memory. Work::steps() is empty: gloo's steps are inside
// gloo. In a build without gloo (MICRODDP_GLOO=OFF, or libgloo-dev absent),
// connect_gloo throws InputError saying so.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/comm/process_group.h"
#include "core/comm/store.h"

namespace mddp::comm::gloo {

struct GlooOptions {
  std::chrono::milliseconds timeout{300'000};  // bound on set-up and on every collective
  std::string bind_host = "127.0.0.1";         // the address gloo's sockets bind to and publish
  std::string prefix = "comm";                 // store key prefix
};

// Collective: every rank of the job calls it with the same store, size and
// prefix. Blocks until the full mesh is connected; TimeoutError when a rank
// did not join within the timeout.
std::unique_ptr<ProcessGroup> connect_gloo(Store& store, int rank, int size,
                                           const GlooOptions& options);

// "gloo 0.5.0", or why there is none in this build.
std::string gloo_version();

}  // namespace mddp::comm::gloo
