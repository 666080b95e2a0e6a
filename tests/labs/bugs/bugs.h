// Classic student bugs, planted: each namespace holds one Lab function
// written wrong the way students write it, for tests/labs/labs_test.cc to
// check that the Lab's checker names the bug.
#pragma once

#include "labs/implementations.h"

namespace mddp::labs::bugs {

// Lab 3: the reduce-scatter sends block (r - s) instead of (r - s - 1).
namespace ring_off_by_one {
void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op);
}
// Lab 3: the reduce-scatter sends its own input on instead of the running sum.
namespace ring_no_accumulate {
void ring_reduce_scatter(const comm::AlgoContext& ctx, void* data, comm::Blocks blocks,
                         comm::DataType t, comm::ReduceOp op);
}
// Lab 4: the tree reduce sends to v - 1 instead of v minus its lowest set bit.
namespace tree_wrong_parent {
void tree_reduce(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                 comm::ReduceOp op, int root);
}
// Lab 2: rank 0 sends back before it has heard from everyone.
namespace naive_early_result {
void all_reduce_naive(const comm::AlgoContext& ctx, void* data, int64_t count, comm::DataType t,
                      comm::ReduceOp op);
}
// Lab 1: only replica 0 gets the average.
namespace manual_only_first {
void average_gradients(const std::vector<nn::Module*>& replicas);
}
// Lab 5: all-reduce with kAvg, then divide by the world size again.
namespace naive_dp_average_twice {
std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group);
}
// Lab 5: all-reduce with kSum and never divide.
namespace naive_dp_sum_only {
std::unique_ptr<ddp::GradSync> make_naive_sync(std::vector<nn::Parameter*> params,
                                               comm::ProcessGroup& group);
}
// Lab 6: the hook launches the all-reduce and waits for it at once.
namespace hooks_wait_in_hook {
std::unique_ptr<ddp::GradSync> make_hooked_sync(std::vector<nn::Parameter*> params,
                                                comm::ProcessGroup& group);
}
// Lab 7: every complete bucket is launched at once, whatever its index.
namespace flush_out_of_order {
std::size_t flush_in_order(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch);
}
// Lab 7: the cap check uses >= (a bucket exactly at its cap is closed early).
namespace assign_cap_off_by_one {
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& param_bytes,
                                                     std::size_t first_cap_bytes,
                                                     std::size_t cap_bytes);
}
// Lab 8: no initial broadcast.
namespace ddp_no_broadcast {
std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync);
}
// Lab 8: no_sync ignored: every micro-batch synchronises.
namespace ddp_always_sync {
std::unique_ptr<ddp::DataParallel> make_ddp(nn::Module& model, comm::ProcessGroup& group,
                                            const ddp::SyncOptions& sync);
}
// Lab 9: the accuracy is the mean of the ranks' accuracies.
namespace gather_mean_of_accuracies {
GatheredEval gather_eval(const EvalCounts& mine, comm::Communicator& comm, int root);
}
// Lab 9: no barrier after the root's save.
namespace save_without_barrier {
void save_on_root(comm::Communicator& comm, int root, const std::function<void()>& save);
}

// Lab 11: every hook firing counts the parameter off its bucket, so the
// tied weight's bucket leaves after its first contribution.
namespace tied_count_firings {
bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket);
}

}  // namespace mddp::labs::bugs
