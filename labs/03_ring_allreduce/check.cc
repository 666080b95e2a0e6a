// Lab 3's checker: the reduce-scatter alone, the all-gather alone, then the
// all-reduce, each against the ring's schedule (ring_reduce_scatter.cc and
// ring_all_gather.cc state it):
//   reduce-scatter step s: rank r sends block (r - s - 1) mod n, carrying
//                          the contributions of ranks r-s..r, to r + 1
//   all-gather step s:     rank r sends block (r - s) mod n, finished, to r + 1
#include "core/comm/algorithms/algorithms.h"
#include "labs/checks.h"
#include "labs/support/collective_check.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

struct Phase {
  bool reduce_scatter;
  std::size_t first;  // index of its first send in the rank's log
};

std::string phase_name(const Phase& p) {
  return p.reduce_scatter ? "reduce-scatter" : "all-gather";
}

int block_of(int64_t element, const comm::Blocks& b) {
  for (int k = 0; k < b.parts; ++k)
    if (element >= b.begin(k) && element < b.begin(k) + b.size(k)) return k;
  return -1;
}

// The first message (lowest step, then lowest rank) that left the ring's schedule.
std::vector<std::string> diagnose_ring(const CollectiveCase& c,
                                       const std::vector<MessageLog>& logs) {
  const int n = c.world;
  const comm::Blocks blocks{c.count, n};
  std::vector<Phase> phases;
  if (c.stage != "all-gather") phases.push_back({true, 0});
  if (c.stage != "reduce-scatter")
    phases.push_back({false, c.stage == "all-reduce" ? std::size_t(n - 1) : 0});
  for (const Phase& ph : phases) {
    for (int s = 0; s < n - 1; ++s) {
      for (int r = 0; r < n; ++r) {
        const std::string at = str(phase_name(ph), " step ", s, ": rank ", r);
        const auto& sends = logs[r].sends;
        const std::size_t k = ph.first + s;
        if (k >= sends.size())
          return {str(at, " sent nothing; the ring sends one block in each of its n - 1 = ", n - 1,
                      " steps")};
        const Message& m = sends[k];
        const int right = mod(r + 1, n), left = mod(r - 1, n);
        if (m.peer != right)
          return {str(
              at, " sent to rank ", m.peer,
              "; in the ring every rank sends to its right neighbour, (r + 1) mod n = ", right)};
        const int want_block = ph.reduce_scatter ? mod(r - s - 1, n) : mod(r - s, n);
        const uint32_t want_ranks = ph.reduce_scatter ? ring_span(r - s, s + 1, n) : (1u << n) - 1;
        const auto p = decode(m.first);
        if (!p)
          return {str(at, " sent a message starting with ", show(m.first),
                      ", which is no partial sum of the inputs (a buffer never filled?)")};
        const int b = block_of(p->element_mod, blocks);
        const std::string formula = ph.reduce_scatter ? "(r - s - 1) mod n" : "(r - s) mod n";
        if (b != want_block) {
          std::vector<std::string> out{str(at, " sent block ", b, " to rank ", right,
                                           ", but the ring sends block ", formula, " = ",
                                           want_block, " at step ", s)};
          if (mod(b - want_block, n) == 1 || mod(want_block - b, n) == 1)
            out.push_back(
                str("ring off by one block: check the block index of each step (rank r sends ",
                    formula, " and receives the block before it)"));
          return out;
        }
        if (p->ranks != want_ranks) {
          std::vector<std::string> out{
              str(at, " sent block ", b, " holding the contributions of ranks ", rank_set(p->ranks),
                  "; at step ", s, " it should carry ranks ", rank_set(want_ranks))};
          if (ph.reduce_scatter && s > 0 && p->ranks == (1u << r))
            out.push_back(
                "it sent its own input: reduce the block received in the step before into your "
                "copy, "
                "then send that copy on");
          return out;
        }
        const auto want_bytes = blocks.size(want_block) * 4;
        if (m.bytes != want_bytes)
          return {str(at, " sent ", m.bytes, " bytes; block ", want_block, " has ",
                      blocks.size(want_block), " elements (", want_bytes, " bytes)")};
        if (k < logs[r].recvs.size() && logs[r].recvs[k].peer != left)
          return {str(
              at, " received from rank ", logs[r].recvs[k].peer,
              "; in the ring every rank receives from its left neighbour, (r - 1) mod n = ", left)};
      }
    }
  }
  return {
      "every message followed the ring's schedule: the mistake is in what was done with them (the "
      "reduction into "
      "place, or the division for kAvg)"};
}

}  // namespace

void check_ring_allreduce(const Implementations& impl, const CheckOptions& o, Report& report) {
  using Stage = CollectiveStage;
  const RingFns fns = impl.ring;
  CollectiveLab lab;
  lab.algorithm = "ring";
  lab.stages = {
      {.name = "reduce-scatter",
       .output = Stage::Output::kOwnBlock,
       .ops = {comm::ReduceOp::kSum, comm::ReduceOp::kMax},
       .run =
           [fns](const comm::AlgoContext& ctx, float* data, const CollectiveCase& c) {
             fns.reduce_scatter(ctx, data, comm::Blocks{c.count, c.world}, comm::DataType::kFloat32,
                                c.op);
           }},
      {.name = "all-gather",
       .input = Stage::Input::kOwnBlockResult,
       .run =
           [fns](const comm::AlgoContext& ctx, float* data, const CollectiveCase& c) {
             fns.all_gather(ctx, data, comm::Blocks{c.count, c.world}, comm::DataType::kFloat32);
           }},
      all_reduce_stage(fns.all_reduce),
  };
  lab.student_all_reduce = fns.all_reduce;
  lab.reference_all_reduce = comm::all_reduce_ring;
  lab.diagnose = diagnose_ring;
  check_collective(lab, o, report);
}

}  // namespace mddp::labs
