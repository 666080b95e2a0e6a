// Every Lab's checker (labs/*/check.cc), each over the functions of an
// Implementations table, reporting into a Report. `microddp lab check`
// calls them through the registry (registry.h). Where a check compares
// with the reference, it calls core/'s function directly.
#pragma once

#include "labs/implementations.h"
#include "labs/support/options.h"
#include "labs/support/report.h"

namespace mddp::labs {

void check_manual(const Implementations& impl, const CheckOptions& o, Report& report);
void check_naive_allreduce(const Implementations& impl, const CheckOptions& o, Report& report);
void check_ring_allreduce(const Implementations& impl, const CheckOptions& o, Report& report);
void check_tree_allreduce(const Implementations& impl, const CheckOptions& o, Report& report);
void check_naive_dp(const Implementations& impl, const CheckOptions& o, Report& report);
void check_hooks(const Implementations& impl, const CheckOptions& o, Report& report);
void check_bucketing(const Implementations& impl, const CheckOptions& o, Report& report);
void check_ddp(const Implementations& impl, const CheckOptions& o, Report& report);
void check_sync_primitives(const Implementations& impl, const CheckOptions& o, Report& report);
void check_performance(const Implementations& impl, const CheckOptions& o, Report& report);
void check_tied_weight(const Implementations& impl, const CheckOptions& o, Report& report);
// The diagnosis Labs (labs/support/diagnosis.h): answers about a job with a planted fault.
void check_hang(const Implementations& impl, const CheckOptions& o, Report& report);
void check_straggler(const Implementations& impl, const CheckOptions& o, Report& report);
void check_poisoned_shard(const Implementations& impl, const CheckOptions& o, Report& report);
void check_mismatched_rank(const Implementations& impl, const CheckOptions& o, Report& report);
void check_uneven_work(const Implementations& impl, const CheckOptions& o, Report& report);
void check_slow_link(const Implementations& impl, const CheckOptions& o, Report& report);

}  // namespace mddp::labs
