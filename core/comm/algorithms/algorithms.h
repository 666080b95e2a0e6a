// The catalogue of collective algorithms. Each is implemented in its own file
// under the spec comment that states its words and its alpha-beta cost; all
// run on the progress thread, blocking, bounded by ctx.deadline, and throw the
// transport's CommError (naming the peer) when a step fails.
//
// Buffer contracts are the Communicator's (communicator.h); counts are in
// elements. Every rank must call the same algorithm with the same count,
// dtype, op and root. count 0 moves nothing (except barrier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/comm/algorithms/context.h"
#include "core/comm/topology.h"

namespace mddp::comm {

// ---- all-reduce: data[count] becomes the reduction over all ranks ----------
void all_reduce_ring(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op);
void all_reduce_naive(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op);
void all_reduce_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op);
void all_reduce_doubling(const AlgoContext& ctx, void* data, int64_t count, DataType t,
                         ReduceOp op);
// Direct all-reduce among ranks of one host (direct_all_reduce.cc): when
// every rank's data lies in its shared arena, each reduces its block
// straight out of its peers' buffers and copies theirs back; true when it
// ran. false when some rank's buffer is private: nothing was done, on every
// rank, and the caller runs a flat algorithm instead.
bool all_reduce_direct(const AlgoContext& ctx, HostSharedMemory& shm, void* data, int64_t count,
                       DataType t, ReduceOp op);
// kAuto's choice among the flat algorithms for a message of `bytes` on
// `world` ranks: ring, tree or doubling. Depends only on its arguments, so
// every rank picks the same. (The Communicator picks kHierarchical first
// where the topology calls for it: communicator.h.)
Algorithm choose_all_reduce_algorithm(std::size_t bytes, int world);
// The function of a flat algorithm (ring, naive, tree, doubling), for the
// Communicator and the hierarchical all-reduce's cross-host level.
using AllReduceFn = void (*)(const AlgoContext&, void*, int64_t, DataType, ReduceOp);
AllReduceFn flat_all_reduce(Algorithm a);

// ---- hierarchical all-reduce (hierarchical_all_reduce.cc) --------------------
// The two levels it runs on: the job's topology and a transport among this
// rank's host's ranks, numbered by local rank (null when the host has one
// rank). ctx.transport, the world's, carries the cross-host messages.
struct HostLevels {
  const HostTopology& topology;
  Transport* host;
};
void all_reduce_hierarchical(const AlgoContext& ctx, const HostLevels& levels, void* data,
                             int64_t count, DataType t, ReduceOp op);
// A piece of the buffer (elements [begin, begin + count)) and its owner on
// each host (owners[h], a world rank), in increasing order: the spec's words.
struct HostPiece {
  int64_t begin = 0, count = 0;
  std::vector<int> owners;
};
std::vector<HostPiece> host_pieces(const HostTopology& topology, int64_t count);

// ---- ring building blocks (ring_reduce_scatter.cc, ring_all_gather.cc) -----
// In place over data split into `blocks` (blocks.parts == n): afterwards
// block r holds the reduction (kAvg: still the sum) of every rank's block r;
// the other blocks hold partial results.
void ring_reduce_scatter_inplace(const AlgoContext& ctx, void* data, Blocks blocks, DataType t,
                                 ReduceOp op);
// In place: block r of data is this rank's; afterwards every block is filled.
void ring_all_gather_inplace(const AlgoContext& ctx, void* data, Blocks blocks, DataType t);

// ---- the other collectives --------------------------------------------------
// in[count * n] -> out[count]: the reduction of everyone's block r. Either
// in place (out == in + r*count: the all-reduce's first half, the other
// blocks left with partial results) or out must not overlap in (partial
// results are built in out while in is still read).
void reduce_scatter_ring(const AlgoContext& ctx, const void* in, void* out, int64_t count,
                         DataType t, ReduceOp op);
// in[count] -> out[count * n], rank q's block at q*count. in may alias out's block r.
void all_gather_ring(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t);
void broadcast_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, int root);
// The result lands in root's data; other ranks' data is overwritten with partial results.
void reduce_tree(const AlgoContext& ctx, void* data, int64_t count, DataType t, ReduceOp op,
                 int root);
void scatter_linear(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t,
                    int root);
void gather_linear(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t,
                   int root);
void barrier_dissemination(const AlgoContext& ctx);

}  // namespace mddp::comm
