// The functions a Lab checks, as a table: `microddp lab check` checks the
// ones this binary was built with (bindings.cc over my_work/), the tests
// check the reference solutions (labs/*/solution.cc), the untouched
// exercises (labs/*/exercise.cc) and planted bugs (tests/labs/bugs/) through
// the same checkers. Each member has the type of the function the Lab's
// lab.h declares.
#pragma once

#include "labs/01_manual/lab.h"
#include "labs/02_naive_allreduce/lab.h"
#include "labs/03_ring_allreduce/lab.h"
#include "labs/04_tree_allreduce/lab.h"
#include "labs/05_naive_dp/lab.h"
#include "labs/06_hooks/lab.h"
#include "labs/07_bucketing/lab.h"
#include "labs/08_ddp/lab.h"
#include "labs/09_sync_primitives/lab.h"
#include "labs/11_tied_weight/lab.h"

namespace mddp::labs {

struct ManualFns {
  decltype(&impl::average_gradients) average_gradients;
};
struct RingFns {
  decltype(&impl::ring_reduce_scatter) reduce_scatter;
  decltype(&impl::ring_all_gather) all_gather;
  decltype(&impl::all_reduce_ring) all_reduce;
};
struct TreeFns {
  decltype(&impl::tree_reduce) reduce;
  decltype(&impl::tree_broadcast) broadcast;
  decltype(&impl::all_reduce_tree) all_reduce;
};
using AllReduceFn = decltype(&impl::all_reduce_naive);
using SyncFactory = decltype(&impl::make_naive_sync);
struct BucketingFns {
  decltype(&impl::assign_buckets) assign;
  decltype(&impl::flush_in_order) flush;
};
using DdpFactory = decltype(&impl::make_ddp);
struct PrimitivesFns {
  decltype(&impl::broadcast_model) broadcast_model;
  decltype(&impl::gather_eval) gather_eval;
  decltype(&impl::save_on_root) save_on_root;
};

using CountFn = decltype(&impl::count_contribution);

struct Implementations {
  ManualFns manual;
  AllReduceFn naive_allreduce;
  RingFns ring;
  TreeFns tree;
  SyncFactory naive_dp;
  SyncFactory hooks;
  BucketingFns bucketing;
  DdpFactory ddp;
  PrimitivesFns primitives;
  CountFn tied_weight;
};

// The impl:: functions linked into this binary (bindings.cc).
Implementations linked_implementations();

}  // namespace mddp::labs
