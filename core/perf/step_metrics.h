// What one training step cost on one rank: the record the metrics stream,
// the run log, the dashboard and `microddp analyze` share.
//
// Words: `exposed` communication is the time the training thread waited for
// all-reduces after backward; `total` communication is the sum of the
// all-reduce spans on the progress thread. The overlap fraction is the share
// of communication hidden behind backward: 1 - exposed / total.
//
// Clocks: start_ns and the bucket spans are the rank's steady clock;
// clock_offset_ns turns them into the coordinator's wall clock (Unix ns), so
// ranks on different hosts can be lined up (core/perf/timeline.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/comm/span.h"

namespace mddp::perf {

// Steps whose records carry their all-reduces' algorithm steps
// (CommSpan::steps, for the dashboard's Collectives view): every tenth, and
// only up to kStepTraceMaxRanks ranks (a ring all-reduce has 2(n-1) steps
// per rank), which keeps metrics.jsonl within a few times its untraced size.
inline constexpr int64_t kStepTraceEvery = 10;
inline constexpr int kStepTraceMaxRanks = 64;
bool traced_step(int64_t step, int world_size);

struct StepMetrics {
  int rank = 0;
  int64_t step = 0;
  double loss = 0;
  double data_ms = 0, forward_ms = 0, backward_ms = 0, exposed_comm_ms = 0, optimizer_ms = 0,
         step_ms = 0;
  double total_comm_ms = 0;
  // Bytes of the step's synchronisation (Note [Wire bytes] in core/comm/span.h):
  // the messages handed to collectives, the fp32 gradients they stand for,
  // and what this rank really sent. grad_bytes / comm_bytes is the
  // compression ratio (1 uncompressed, 2 for fp16/bf16).
  std::size_t comm_bytes = 0;
  std::size_t grad_bytes = 0;
  std::size_t sent_bytes = 0;
  // What this rank trained on in the step: samples, and tokens for a
  // language model (samples x block; 0 for the other models). In JSON with
  // their rates over step_ms, "samples_per_s" and "tokens_per_s".
  int64_t samples = 0, tokens = 0;
  // Per bucket (or parameter): ready, launch, start, end; on traced steps
  // also its algorithm's steps, in JSON as arrays
  //   [phase, index, send_peer, send_block, recv_peer, recv_block, send_bytes, recv_bytes, start,
  //   end]
  // with start and end in ns after the bucket's start_ns.
  std::vector<comm::CommSpan> buckets;
  int64_t start_ns = 0;         // steady clock when the step began (its data phase)
  int64_t clock_offset_ns = 0;  // steady + offset = coordinator's Unix ns (0: unknown)
  // An evaluation at an epoch end rather than a training step: only step,
  // eval_loss, eval_accuracy (-1: regression) and eval_sample mean anything.
  bool eval = false;
  double eval_loss = 0, eval_accuracy = -1;
  // Rank 0's text from a GPT trained on text (train::evaluation_sample), "" otherwise.
  std::string eval_sample;

  double overlap() const;        // in [0, 1]; 0 when nothing was communicated
  double samples_per_s() const;  // this rank's; 0 without a step time
  double tokens_per_s() const;
  double compression_ratio() const;  // grad_bytes / comm_bytes; 0 when nothing was communicated
  nlohmann::json to_json() const;
  // The inverse of to_json (extra keys are ignored; a missing key keeps its
  // default). Throws InputError naming the key on a value of the wrong type.
  static StepMetrics from_json(const nlohmann::json& j);
};

// Overlap fraction from exposed and total communication time.
double overlap_fraction(double exposed_ms, double total_ms);

}  // namespace mddp::perf
