// Lab 2 — naive all-reduce: gather to a root, combine, send back
// (docs/allreduce.md §1). What you write (my_work/naive_allreduce.cc); the
// reference is comm::all_reduce_naive (core/comm/algorithms/naive_all_reduce.cc),
// with the same signature.
#pragma once

#include <cstdint>

#include "core/comm/algorithms/context.h"

namespace mddp::labs::impl {

// data[count] on every rank becomes the element-wise reduction over all
// ranks (kAvg: the sum divided by the world size). fp32 only.
void all_reduce_naive(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                      comm::ReduceOp op);

}  // namespace mddp::labs::impl
