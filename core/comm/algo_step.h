// AlgoStep: one step of a collective's algorithm as it ran on one rank —
// what it sent to whom, what it received from whom, and when. The
// Communicator records the steps of every collective (Work::steps());
// `microddp demo ring` prints them, the dashboard's Collectives view
// animates them (they travel in the metrics records, core/perf), and the
// course's Lab checkers (labs/) compare a student's steps with them.
//
// A step is one ring step (the segments of a block together), one tree
// round, or one message of the naive algorithm, in the words of the
// algorithm's own spec comment (core/comm/algorithms/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mddp::comm {

enum class StepPhase { kReduceScatter, kAllGather, kReduce, kBroadcast };
const char* to_string(StepPhase p);  // "reduce-scatter", "all-gather", "reduce", "broadcast"
// The inverse of to_string; throws InputError naming the spelling.
StepPhase parse_step_phase(const std::string& s);

// Which ranks a step ran among: the whole world (every flat algorithm), the
// ranks of one host, or one rank per host (the two levels of the
// hierarchical all-reduce, hierarchical_all_reduce.cc).
enum class StepLevel { kWorld, kHost, kCrossHost };

struct AlgoStep {
  StepPhase phase = StepPhase::kReduceScatter;
  int index = 0;                         // step (ring) or round (tree) within the phase, from 0
  int send_peer = -1, recv_peer = -1;    // world ranks; -1: this side is empty
  int send_block = -1, recv_block = -1;  // ring blocks (context.h); -1: the whole buffer
  int64_t send_bytes = 0, recv_bytes = 0;
  int64_t start_ns = 0, end_ns = 0;  // steady clock of the rank that ran it
  StepLevel level = StepLevel::kWorld;
};

// The phase with its level, as logs and metrics records spell it:
// "reduce-scatter" (world), "host reduce-scatter", "cross-host all-gather".
std::string phase_name(const AlgoStep& step);
// The inverse: sets step.phase and step.level; throws InputError naming the spelling.
void parse_phase_name(const std::string& s, AlgoStep& step);

// The all-reduce algorithm one collective's steps (on one rank) have the
// shape of, where only the steps can tell (the choice was made where it
// ran): "hierarchical" for steps within and across hosts (auto chose it by
// topology), "direct" for reduce-scatter steps that only receive (the rank
// read its block out of every peer's buffer: no other algorithm does); ""
// otherwise, when the configured algorithm resolved by size says it.
std::string algorithm_of(const std::vector<AlgoStep>& steps);

// Receives each step as it completes, on the thread running the collective.
// `data` is the collective's output buffer at that moment (partial results
// included), for observers that show values (`microddp demo ring`).
class StepTrace {
 public:
  virtual ~StepTrace() = default;
  virtual void record(const AlgoStep& step, const void* data) = 0;
};

}  // namespace mddp::comm
