// A test seam: holding every rank after a chosen step, so that a fault test
// acts (kills a rank) at exactly that step however fast or loaded the
// machine is (tests/fault/restart_lib.sh). Timing only: what is computed
// does not change, and without the variables below nothing happens.
//
//   MDDP_TEST_HOLD_AT_STEPS=S1,S2,...  the steps after which ranks hold
//                                      (-1: before the data plane connects;
//                                      -2: just after the join was accepted)
//   MDDP_TEST_HOLD_DIR=DIR             after step S, rank R creates
//                                      DIR/S.held.R, then waits for DIR/S.go
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace mddp::worker {

class TestHold {
 public:
  TestHold();  // reads the environment
  // After `step` of `rank`: returns at once unless the step is one to hold at.
  void after_step(int64_t step, int rank) const;
  // Before the data plane connects: the hold of step -1.
  void before_data_plane(int rank) const { after_step(-1, rank); }
  // Just after the join was accepted, before the heartbeat and the Watch
  // stream start: the hold of step -2.
  void after_join(int rank) const { after_step(-2, rank); }

 private:
  std::set<int64_t> steps_;
  std::string dir_;
};

}  // namespace mddp::worker
