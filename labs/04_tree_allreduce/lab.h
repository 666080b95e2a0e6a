// Lab 4 — tree all-reduce = binomial-tree reduce + binomial-tree broadcast
// (docs/allreduce.md §2). What you write (my_work/tree_allreduce.cc); the
// references, with the same signatures, are comm::reduce_tree,
// comm::broadcast_tree and comm::all_reduce_tree (core/comm/algorithms/tree_*.cc).
#pragma once

#include <cstdint>

#include "core/comm/algorithms/context.h"

namespace mddp::labs::impl {

// The reduction over all ranks lands in root's data (kAvg: divided by the
// world size there); other ranks' data may be overwritten with partial results.
void tree_reduce(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                 comm::ReduceOp op, int root);
// root's data[count] reaches every rank.
void tree_broadcast(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                    int root);
// data[count] becomes the reduction over all ranks.
void all_reduce_tree(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                     comm::ReduceOp op);

}  // namespace mddp::labs::impl
