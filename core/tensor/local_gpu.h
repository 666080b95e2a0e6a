// Which GPU `--device cuda` means for this process, from the launcher's
// environment. The layouts in use:
//  * torchrun, `microddp run`, the local launchers: one process per GPU on a
//    host that sees all of them; LOCAL_RANK r uses cuda:r;
//  * SLURM's srun: the same with SLURM_LOCALID instead of LOCAL_RANK;
//  * one GPU per process or container (SLURM's --gpus-per-task, Kubernetes'
//    nvidia.com/gpu: 1, docker --gpus device=N): CUDA_VISIBLE_DEVICES names
//    exactly one GPU, which the process sees as cuda:0 whatever its local rank.
// No CUDA call is made (Note [CUDA and fork] in cuda_status.h).
#pragma once

#include <functional>
#include <string>

namespace mddp::tensor {

// Reads an environment variable; null when unset.
using EnvLookup = std::function<const char*(const char*)>;

struct LocalGpu {
  int index = 0;       // the K of cuda:K
  std::string reason;  // how it was chosen, for the log ("LOCAL_RANK=1", ...)
};

// Throws InputError naming the variable when LOCAL_RANK / SLURM_LOCALID is
// not a non-negative integer, or when the local rank has no GPU among the
// ones CUDA_VISIBLE_DEVICES lists.
LocalGpu local_gpu(const EnvLookup& env);

}  // namespace mddp::tensor
