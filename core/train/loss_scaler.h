// Dynamic loss scaling for --precision fp16, with PyTorch's GradScaler rules.
//
// fp16 holds magnitudes from 2^-24 to 65504 only: small gradients rounded to
// fp16 in the backward GEMMs (and on the wire) would become zero. So the
// loss gradient is multiplied by `scale` before the backward, which lifts
// every gradient by the same factor, and the fp32 gradients are divided by
// it again before the optimiser step. A scale too large overflows instead:
//
//   after the backward (and DDP's all-reduce, so every rank sees the same
//   gradients and takes the same decision):
//     any gradient inf or NaN  -> skip the optimiser step, scale *= backoff,
//                                 good_steps = 0
//     all finite               -> unscale, step, ++good_steps; after `window`
//                                 good steps in a row scale *= growth
//                                 (unless that would overflow fp32),
//                                 good_steps = 0
//
// The state (scale, good_steps, skipped) is in the checkpoint, so a resumed
// fp16 run takes the same decisions as an uninterrupted one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/nn/module.h"
#include "core/train/config.h"  // LossScaleConfig

namespace mddp::train {

class LossScaler {
 public:
  // A disabled scaler (fp32, bf16) has scale 1 and never skips.
  LossScaler(bool enabled, LossScaleConfig cfg);

  bool enabled() const { return enabled_; }
  float scale() const { return enabled_ ? scale_ : 1.0f; }
  int64_t good_steps() const { return good_steps_; }
  int64_t skipped_steps() const { return skipped_; }

  // After the gradients are final. All finite: multiplies each gradient by
  // factor / scale and returns true. Any inf or NaN: leaves the gradients
  // alone and returns false (the caller skips the optimiser step). Updates
  // the scale by the rules above either way. Disabled: scales by `factor`
  // when it is not 1 and returns true.
  bool unscale(const std::vector<nn::Parameter*>& params, float factor);

  // The state as JSON for the checkpoint, and back (InputError naming
  // `what` when the JSON is not a scaler state).
  std::string state_json() const;
  void restore(const std::string& json, const std::string& what);
  void set_state(float scale, int64_t good_steps, int64_t skipped);  // DDP: rank 0's state

 private:
  bool enabled_;
  LossScaleConfig cfg_;
  float scale_;
  int64_t good_steps_ = 0, skipped_ = 0;
};

}  // namespace mddp::train
