#include "core/tensor/gpu_inventory.h"

#include <cctype>
#include <fstream>

#include "core/common/check.h"
#include "mddp/config.h"
#if MDDP_HAVE_CUDA
#include "core/tensor/cuda/cuda_runtime.h"
#endif

namespace mddp::tensor {
namespace {

// The kernel module's version, from the line NVIDIA's driver writes:
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  ...".
std::string driver_release() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  const std::string key = "Kernel Module";
  std::size_t at = line.find(key);
  if (at == std::string::npos) return "";
  at = line.find_first_not_of(" \t", at + key.size());
  if (at == std::string::npos || !std::isdigit(static_cast<unsigned char>(line[at]))) return "";
  return line.substr(at, line.find_first_not_of("0123456789.", at) - at);
}

}  // namespace

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return str(version / 1000, ".", version % 1000 / 10);
}

GpuInventory gpu_inventory() {
  GpuInventory g;
  g.built_with_cuda = MDDP_HAVE_CUDA;
  g.built_architectures = MDDP_CUDA_ARCHITECTURES;
  g.status = cuda_status();
  g.driver_release = driver_release();
#if MDDP_HAVE_CUDA
  cuda::versions(&g.driver_version, &g.runtime_version);
  for (int i = 0; i < g.status.devices; ++i) {
    GpuDevice d;
    d.index = i;
    cuda::describe_device(i, &d.name, &d.memory_bytes, &d.major, &d.minor);
    g.devices.push_back(d);
  }
#endif
  return g;
}

}  // namespace mddp::tensor
