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
//   nan:RANK:STEP         RANK's targets of STEP hold a NaN (a damaged
//                         record of its shard; a regression target: a NaN
//                         input would vanish in the first ReLU)
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor/tensor.h"

namespace mddp::train {

struct LabFault {
  enum class Kind { kNone, kHang, kSlow, kNan };
  Kind kind = Kind::kNone;
  int rank = -1;
  int64_t step = 0;
  std::string phase;
  double ms = 0;

  // The fault in `text` (the variable's syntax above); "" is none. Throws
  // InputError naming MDDP_LAB_FAULT when the text is not one of them.
  static LabFault parse(const std::string& text);
  // The fault of this process's environment.
  static LabFault from_environment();

  // At the start of `phase` of `step` on `rank`: never returns for the
  // planted hang; sleeps for the planted straggler.
  void at_phase(int rank, int64_t step, const std::string& phase) const;
  // After `rank` loaded the targets of `step` into y: the planted NaN.
  void poison(int rank, int64_t step, tensor::Tensor& y) const;
};

}  // namespace mddp::train
