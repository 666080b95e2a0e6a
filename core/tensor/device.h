// Where a tensor lives. The CPU is the default and the reference; CUDA
// devices plug in beside it (core/tensor/cuda/).
#pragma once

#include <string>

namespace mddp::tensor {

enum class DeviceType { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  bool operator==(const Device&) const = default;

  // "cpu", "cuda" (index from LOCAL_RANK, else 0) or "cuda:K". Throws InputError otherwise.
  static Device parse(const std::string& text);
  std::string str() const;
};

// Number of usable CUDA devices (0 without a GPU or in a build without CUDA).
int cuda_device_count();

// Throws a clear InputError if `device` cannot be used on this machine/build.
void require_available(const Device& device);

}  // namespace mddp::tensor
