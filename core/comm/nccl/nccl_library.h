// NCCL's functions, loaded from libnccl when the first NCCL group connects
// instead of linked: NCCL is a 200 MB library only GPU machines have, and
// the same microddp binary (a release, the compose lab's image) must start
// on machines without it. Found where PyTorch finds it (the nvidia-nccl
// wheel, a toolkit, LD_LIBRARY_PATH: core/common/shared_library.h), or at
// MDDP_NCCL_LIBRARY. Private to core/comm/nccl.
#pragma once

#include <nccl.h>

namespace mddp::comm::nccl {

struct NcclLibrary {
  decltype(&::ncclGetVersion) get_version;
  decltype(&::ncclGetUniqueId) get_unique_id;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&::ncclCommFinalize) comm_finalize;
  decltype(&::ncclCommDestroy) comm_destroy;
  decltype(&::ncclCommAbort) comm_abort;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error;
  decltype(&::ncclGetErrorString) get_error_string;
  decltype(&::ncclGetLastError) get_last_error;
  decltype(&::ncclAllReduce) all_reduce;
  decltype(&::ncclReduceScatter) reduce_scatter;
  decltype(&::ncclAllGather) all_gather;
  decltype(&::ncclBroadcast) broadcast;
};

// Loads NCCL on the first call (thread-safe; a failure is retried on the
// next call). Throws InputError naming where it looked when no NCCL loads,
// or the function a too-old NCCL lacks.
const NcclLibrary& nccl_library();

}  // namespace mddp::comm::nccl
