// Where a tensor lives. The CPU is the default and the reference; CUDA
// devices plug in beside it (core/tensor/cuda/).
#pragma once

#include <string>

#include "core/tensor/cuda_status.h"

namespace mddp::tensor {

enum class DeviceType { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  bool operator==(const Device&) const = default;

  // "cpu", "cuda" (this process's GPU from its launcher's environment:
  // core/tensor/local_gpu.h) or "cuda:K". Throws InputError otherwise. Makes no CUDA call.
  static Device parse(const std::string& text);
  std::string str() const;
};

// Times this process blocked until a GPU finished work (0 without CUDA):
// see tensor::cuda::host_waits in cuda/context.h.
int64_t gpu_host_waits();

// Number of usable CUDA devices (0 without a GPU, when CUDA cannot start, or
// in a build without CUDA). Starts CUDA in this process (Note [CUDA and fork]).
int cuda_device_count();

// Throws a clear InputError if `device` cannot be used on this machine/build
// (which includes "a GPU is present but CUDA cannot start", with the reason).
// Starts CUDA in this process for a CUDA device.
void require_available(const Device& device);

// Checks that `local_ranks` ranks on this host can each have a GPU of their
// own for --device `device_text` (NCCL refuses two ranks on one GPU): "cuda"
// gives local rank r cuda:r, so the host needs local_ranks GPUs; "cuda:K"
// names one GPU, so it takes exactly one rank. Throws InputError saying what
// to do; does nothing for "cpu". Asks CUDA in a child process
// (probe_cuda_status), so the caller may fork its ranks afterwards.
void require_gpu_per_local_rank(const std::string& device_text, int local_ranks);

// The GPU of local rank `local_rank` under --device cuda (torchrun's rule:
// cuda:LOCAL_RANK); throws InputError when the host has too few GPUs.
Device gpu_of_local_rank(int local_rank);

}  // namespace mddp::tensor
