// The checker the three all-reduce Labs share (naive, ring, tree): the
// student's functions run on real processes at every world size and over
// both transports, on inputs whose partial sums can be decoded (values.h),
// through a RecordingTransport (exchanges.h). A wrong result names the rank,
// the element, its block, expected and got; the Lab's diagnosis then reads
// every rank's messages and names the first step that left the algorithm's
// schedule. Afterwards the student's all-reduce is timed next to the
// reference and the alpha-beta model fitted to the reference's times.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "labs/implementations.h"
#include "labs/support/exchanges.h"
#include "labs/support/options.h"
#include "labs/support/report.h"

namespace mddp::labs {

// One case of a stage, as the diagnosis sees it.
struct CollectiveCase {
  std::string stage;  // the stage's name
  int world = 0;
  int64_t count = 0;
  comm::ReduceOp op = comm::ReduceOp::kSum;
  int root = 0;
};

struct CollectiveStage {
  std::string name;  // "reduce-scatter", "all-gather", "reduce", "broadcast", "all-reduce"
  // What each rank holds before: every rank its contributions; or the
  // finished result in its own block only (all-gather) or on the root only
  // (broadcast), NaN elsewhere.
  enum class Input { kContributions, kOwnBlockResult, kRootResult } input = Input::kContributions;
  // What is checked after: rank r's own block, everything on every rank, or
  // everything on the root.
  enum class Output { kOwnBlock, kAll, kRoot } output = Output::kAll;
  std::vector<comm::ReduceOp> ops{comm::ReduceOp::kSum};
  bool roots = false;        // run with root 0 and root n-1
  bool large_count = false;  // also a count of 600,001 (blocks larger than a ring segment)
  // Calls the student's function on this rank's buffer.
  std::function<void(const comm::AlgoContext& ctx, float* data, const CollectiveCase& c)> run;
};

// The stage every collective Lab ends with: the all-reduce itself (sum,
// avg, max; a large count too), by the student's `fn`.
CollectiveStage all_reduce_stage(AllReduceFn fn);

struct CollectiveLab {
  std::string algorithm;  // the alpha-beta model: naive | ring | tree
  std::vector<CollectiveStage> stages;
  AllReduceFn student_all_reduce;    // timed next to ...
  AllReduceFn reference_all_reduce;  // ... this
  // Which step left the schedule, from every rank's messages in a wrong
  // case (empty: nothing to say). Only called for sums with count < 1000,
  // whose messages decode.
  std::function<std::vector<std::string>(const CollectiveCase& c,
                                         const std::vector<MessageLog>& logs)>
      diagnose;
};

void check_collective(const CollectiveLab& lab, const CheckOptions& options, Report& report);

}  // namespace mddp::labs
