// Runs N ranks of a job on this host as forked processes that meet through a
// FileStore in a fresh temporary directory (no coordinator needed): used by
// `bench`, `verify` and `demo` commands, over comm::fork_ranks. The first
// failing rank's exit status is returned and the others are stopped, so
// nothing hangs. The ranks are forked without exec, so the caller must not
// have started CUDA (Note [CUDA and fork] in core/tensor/cuda_status.h):
// run_local_ranks refuses to.
#pragma once

#include <functional>
#include <string>

#include "core/comm/store.h"
#include "core/common/temp_dir.h"  // make_temp_dir, for the commands that use both

namespace mddp::cli {

// fn(rank, store) runs in child `rank`; a thrown mddp::Error prints one line
// "rank R: error: ..." and makes that child exit 1. Returns 0 when all ranks
// succeeded, else the first failure's exit code (128+signal if killed).
int run_local_ranks(int nproc, const std::function<void(int rank, comm::Store& store)>& fn);

}  // namespace mddp::cli
