// The learning rate over a run (--lr, --warmup-steps, --lr-min), as
// nanoGPT and llm.c schedule it: a linear warm-up from lr / warmup to lr
// over the first `warmup` steps, then a cosine decay from lr down to lr_min
// at the last step. A pure function of the step, so a resumed run needs
// only its step to continue the schedule.
#pragma once

#include <cstdint>

namespace mddp::nn {

struct LrSchedule {
  float lr = 1e-3f;      // the peak (--lr)
  float lr_min = -1.0f;  // the end of the decay; < 0: no decay (a constant rate after the warm-up)
  int64_t warmup = 0;    // steps of linear warm-up (0: none)
  int64_t total = 1;     // the run's optimiser steps
};

// The rate of optimiser step `step`, counted from 1.
float lr_at(const LrSchedule& s, int64_t step);

}  // namespace mddp::nn
