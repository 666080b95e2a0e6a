// What this process finds of the GPU stack, for `microddp gpu` and the GPU
// check (scripts/gpu-check): whether this build has CUDA, the driver's and
// the build's CUDA versions, whether CUDA starts (cuda_status.h's three
// answers), and each usable GPU. Asking starts CUDA in this process
// (Note [CUDA and fork] in cuda_status.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/cuda_status.h"

namespace mddp::tensor {

struct GpuDevice {
  int index = 0;  // cuda:index
  std::string name;
  int64_t memory_bytes = 0;
  int major = 0, minor = 0;  // compute capability
};

struct GpuInventory {
  bool built_with_cuda = false;
  std::string built_architectures;  // "80;90": the SASS this build carries
  int runtime_version = 0;          // this build's CUDA, 1000 * major + 10 * minor
  int driver_version = 0;           // the newest CUDA the driver supports; 0: no driver
  std::string driver_release;       // the kernel driver's own version ("580.65.06"), if it says
  CudaStatus status;
  std::vector<GpuDevice> devices;
};

GpuInventory gpu_inventory();

// "13.0" for 13000; "none" for 0.
std::string cuda_version_string(int version);

}  // namespace mddp::tensor
