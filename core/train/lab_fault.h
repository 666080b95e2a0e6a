// A fault planted by a diagnosis Lab (`microddp lab run`, labs/README.md):
// the environment variable MDDP_LAB_FAULT of the job's processes names it,
// and only the rank it names acts on it. Without the variable nothing
// happens. It lives in the environment rather than in the job's config, so
// that the config a student reads (job.json, the dashboard) does not give
// the answer away.
//
//   hang:RANK:STEP:PHASE  RANK stops for good when PHASE (data, forward,
//                         backward) of STEP begins; its heartbeats go on
//   slow:RANK:PHASE:MS    RANK sleeps MS milliseconds in PHASE of every step
//   mismatch:RANK:SETTING RANK builds its MLP with another SETTING than the
//                         job's (width: 3/4 of it; depth: one hidden layer
//                         more), as a worker started from a stale script would
//   short:RANK:STEPS      RANK's shard ends after STEPS steps (the others'
//                         go on): uneven work, as with shards of unequal size
//   nan:RANK:STEP         RANK's targets of STEP hold a NaN (a damaged
//                         record of its shard; a regression target: a NaN
//                         input would vanish in the first ReLU)
//   link:RANK:PEER:MBPS   the TCP link between RANK and PEER carries at most
//                         MBPS MB/s each way (the kernel paces both ends'
//                         sends: Transport::limit_send_rate), a slow cable
//   flip:RANK:STEP        RANK flips one bit of its first parameter after
//                         STEP's update, as faulty memory would: a replica
//                         that silently differs (core/train/replica_check.h)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/comm/communicator.h"
#include "core/nn/module.h"
#include "core/tensor/tensor.h"
#include "core/train/config.h"

namespace mddp::train {

struct LabFault {
  enum class Kind { kNone, kHang, kSlow, kMismatch, kShort, kNan, kLink, kFlip };
  Kind kind = Kind::kNone;
  int rank = -1;
  int64_t step = 0;
  std::string phase;
  double ms = 0;
  std::string setting;  // mismatch
  int peer = -1;        // link: the other end
  double mbps = 0;      // link: MB/s each way

  // The fault in `text` (the variable's syntax above); "" is none. Throws
  // InputError naming MDDP_LAB_FAULT when the text is not one of them.
  static LabFault parse(const std::string& text);
  // The fault of this process's environment.
  static LabFault from_environment();

  // At the start of `phase` of `step` on `rank`: never returns for the
  // planted hang; sleeps for the planted straggler.
  void at_phase(int rank, int64_t step, std::string_view phase) const;
  // The job's config as `rank` builds it: with the planted mismatch or
  // short shard.
  void adjust_config(int rank, TrainConfig& cfg) const;
  // After `rank` loaded the targets of `step` into y: the planted NaN.
  void poison(int rank, int64_t step, tensor::Tensor& y) const;
  // After `rank`'s update of `step`: the planted bit flip in `model`.
  void corrupt(int rank, int64_t step, nn::Module& model) const;
  // The data plane's options as `rank` of `world_size` connects: the
  // planted slow link. InputError when an end of it is not in the job.
  void adjust_comm(int rank, int world_size, comm::CommOptions& options) const;
};

}  // namespace mddp::train
