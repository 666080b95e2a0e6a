// Hierarchical (two-level) all-reduce: within each host over its fast link
// (shared memory), across hosts over the network, for jobs with several
// ranks on each of several hosts.
//
// Spec. Words as in context.h, plus: H hosts (HostTopology), host h has L_h
// ranks; a rank's `block` is its block of the host's balanced split of the
// buffer into L_h blocks (Blocks); a `piece` is a run of elements that lies
// in one block of every host's split: the pieces are the intervals between
// the union of all hosts' block boundaries, so an even layout (every L_h =
// L) has L pieces, the blocks themselves, and an uneven one at most
// sum(L_h) - H + 1. A piece's `owners` are, on each host, the rank whose
// block holds it (one rank per host, ordered by host).
//
//   1. host reduce-scatter: a ring reduce-scatter among the host's ranks
//      (ring_reduce_scatter.cc) leaves each rank the host's sum of its block;
//   2. cross-host all-reduce: for each piece in its block, in increasing
//      order, a rank all-reduces the piece with the piece's owners on the
//      other hosts (a ring, or for small pieces recursive doubling or the
//      tree: choose_all_reduce_algorithm over H ranks); the L_h owners of a
//      host's pieces work at once, each on its own piece. Its block now
//      holds the sum over the world (kAvg: divided by n here, once);
//   3. host all-gather: a ring all-gather among the host's ranks
//      (ring_all_gather.cc) gives every rank every block.
//
// Deadlock freedom of step 2: a rank runs its pieces in increasing order and
// every piece's exchange involves only its owners, so a rank waiting on a
// piece waits on owners that run only smaller pieces before it; the chain
// of waits strictly decreases and ends.
//
// Cost, even layout (L ranks on each of H hosts, n = HL), links alpha_l,
// beta_l within a host and alpha_g, beta_g across (a host's L owners share
// its network link):
//
//   T = 2(L-1)(alpha_l + S/(L beta_l)) + 2(H-1)(alpha_g + S/(H beta_g))
//
// against the flat ring's 2(n-1)(alpha_g + S/(n beta_g)) when a ring step
// is as slow as its slowest (inter-host) link. Bytes on a host's network
// link, each way: 2(H-1)/H * S here, 2(n-1)/n * S for the flat ring with
// each host's ranks adjacent in the ring (1.0 S against 1.5 S at 2 x 2).
//
// 16-bit types: every hop widens, combines in fp32 and rounds once, as in
// the ring. Steps are recorded with their level (StepLevel::kHost,
// kCrossHost) and world ranks (sub_group.h).
#include <algorithm>
#include <optional>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/algorithms/sub_group.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {

std::vector<HostPiece> host_pieces(const HostTopology& topology, int64_t count) {
  std::vector<int64_t> cuts;  // every host's block boundaries
  for (int h = 0; h < topology.host_count(); ++h) {
    const Blocks blocks{count, static_cast<int>(topology.ranks_of(h).size())};
    for (int b = 0; b <= blocks.parts; ++b)
      cuts.push_back(b < blocks.parts ? blocks.begin(b) : count);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<HostPiece> pieces;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    HostPiece p{cuts[i], cuts[i + 1] - cuts[i], {}};
    for (int h = 0; h < topology.host_count(); ++h) {
      const auto& ranks = topology.ranks_of(h);
      const Blocks blocks{count, static_cast<int>(ranks.size())};
      int b = 0;  // the block holding the piece's first element
      while (blocks.begin(b) + blocks.size(b) <= p.begin) ++b;
      MDDP_CHECK(blocks.begin(b) + blocks.size(b) >= p.begin + p.count, "piece straddles a block");
      p.owners.push_back(ranks[static_cast<std::size_t>(b)]);
    }
    pieces.push_back(std::move(p));
  }
  return pieces;
}

void all_reduce_hierarchical(const AlgoContext& ctx, const HostLevels& levels, void* data,
                             int64_t count, DataType t, ReduceOp op) {
  if (count == 0) return;
  const HostTopology& topo = levels.topology;
  MDDP_CHECK_EQ(topo.world_size(), ctx.size);
  const int host = topo.host_of(ctx.rank);
  const std::vector<int>& local = topo.ranks_of(host);
  const int lr = topo.local_rank(ctx.rank);
  MDDP_CHECK(local.size() == 1 || levels.host != nullptr, "rank ", ctx.rank,
             ": the hierarchical all-reduce has no transport within its host");
  const Blocks blocks{count, static_cast<int>(local.size())};
  const ReduceOp sum = combine_op(op);  // partial results are sums; kAvg divides once below

  LevelTrace host_trace(ctx.trace, StepLevel::kHost);
  host_trace.begin_group(local);
  std::optional<AlgoContext> in_host;
  if (local.size() > 1) {
    in_host.emplace(group_context(ctx, *levels.host, host_trace));
    MDDP_CHECK_EQ(in_host->rank, lr);
    ring_reduce_scatter_inplace(*in_host, data, blocks, t, sum);  // 1.
  }

  if (topo.host_count() > 1) {  // 2.
    LevelTrace cross_trace(ctx.trace, StepLevel::kCrossHost);
    for (const HostPiece& p : host_pieces(topo, count)) {
      if (p.owners[static_cast<std::size_t>(host)] != ctx.rank || p.count == 0) continue;
      SubTransport across(ctx.transport, p.owners, host);
      cross_trace.begin_group(p.owners);
      const AlgoContext c = group_context(ctx, across, cross_trace);
      void* piece = at(data, p.begin, t);
      const Algorithm algorithm = choose_all_reduce_algorithm(bytes_of(p.count, t), c.size);
      flat_all_reduce(algorithm)(c, piece, p.count, t, sum);
    }
  }

  if (op == ReduceOp::kAvg)
    divide(at(data, blocks.begin(lr), t), static_cast<std::size_t>(blocks.size(lr)), t,
           static_cast<float>(ctx.size));
  if (in_host) ring_all_gather_inplace(*in_host, data, blocks, t);  // 3.
}

}  // namespace mddp::comm
