// Lab 3 — ring all-reduce = ring reduce-scatter + ring all-gather
// (docs/allreduce.md §3). What you write (my_work/ring_allreduce.cc); the
// references, with the same signatures, are comm::ring_reduce_scatter_inplace,
// comm::ring_all_gather_inplace and comm::all_reduce_ring
// (core/comm/algorithms/ring_*.cc).
#pragma once

#include <cstdint>

#include "core/comm/algorithms/context.h"

namespace mddp::labs::impl {

// In place over data split into blocks (blocks.parts == world size):
// afterwards rank r's block r holds the reduction of every rank's block r
// (kAvg: still the sum). The other blocks may hold anything.
void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op);
// In place: rank r's block r is its own; afterwards every rank holds every block.
void ring_all_gather(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                     comm::DataType t);
// data[count] becomes the reduction over all ranks (kAvg: divided by the world size).
void all_reduce_ring(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op);

}  // namespace mddp::labs::impl
