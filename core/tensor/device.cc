#include "core/tensor/device.h"

#include <cstdlib>

#include "core/common/check.h"
#include "core/tensor/local_gpu.h"
#include "mddp/config.h"
#if MDDP_HAVE_CUDA
#include "core/tensor/cuda/context.h"
#endif

namespace mddp::tensor {
namespace {

// Throws the InputError a user should see when `device` is not usable, given
// what CUDA said (`status`, from this process or a probe).
void require_usable(const Device& device, const CudaStatus& status) {
  if (device.is_cpu()) return;
  if (!MDDP_HAVE_CUDA)
    throw InputError("--device " + device.str() +
                     ": this microddp was built without CUDA (configure with the CUDA toolkit "
                     "present, or use --device cpu)");
  if (status.broken()) throw InputError("--device " + device.str() + ": " + status.problem);
  if (status.devices == 0)
    throw InputError("--device " + device.str() +
                     ": no CUDA GPU found on this machine (use --device cpu)");
  if (device.index >= status.devices)
    throw InputError(
        str("--device ", device.str(), ": only ", status.devices, " CUDA device(s) present"));
}

// Local rank r of a `--device cuda` job gets cuda:r (torchrun's rule).
Device gpu_of_local_rank(int local_rank, const CudaStatus& status) {
  const Device device{DeviceType::kCuda, local_rank};
  // Without a usable GPU require_usable gives the clearer message.
  if (status.devices > 0 && local_rank >= status.devices)
    throw InputError(str("--device cuda gives local rank ", local_rank, " cuda:", local_rank,
                         ", but this host has ", status.devices,
                         " GPU(s): NCCL needs a GPU per rank, so start at most ", status.devices,
                         " rank(s) on this host"));
  require_usable(device, status);
  return device;
}

}  // namespace

Device Device::parse(const std::string& text) {
  if (text == "cpu") return {};
  if (text == "cuda")
    return {DeviceType::kCuda, local_gpu([](const char* var) { return std::getenv(var); }).index};
  if (text.rfind("cuda:", 0) == 0) {
    const std::string idx = text.substr(5);
    if (!idx.empty() && idx.size() < 6 && idx.find_first_not_of("0123456789") == std::string::npos)
      return {DeviceType::kCuda, std::stoi(idx)};
  }
  throw InputError("unknown device '" + text + "' (use cpu, cuda or cuda:K)");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

int cuda_device_count() {
  return cuda_status().devices;
}

int64_t gpu_host_waits() {
#if MDDP_HAVE_CUDA
  return cuda::host_waits();
#else
  return 0;
#endif
}

void require_available(const Device& device) {
  if (device.is_cpu()) return;
  require_usable(device, MDDP_HAVE_CUDA ? cuda_status() : CudaStatus{});
}

void require_gpu_per_local_rank(const std::string& device_text, int local_ranks) {
  const Device device = Device::parse(device_text);
  if (device.is_cpu()) return;
  if (device_text != "cuda" && local_ranks > 1)
    throw InputError(str("--device ", device_text, " puts all ", local_ranks,
                         " ranks on one GPU, and NCCL needs a GPU per rank: use --device cuda "
                         "(rank r on cuda:r) or run one rank"));
  const CudaStatus status = MDDP_HAVE_CUDA ? probe_cuda_status() : CudaStatus{};
  if (device_text == "cuda")
    gpu_of_local_rank(local_ranks - 1, status);
  else
    require_usable(device, status);
}

Device gpu_of_local_rank(int local_rank) {
  return gpu_of_local_rank(local_rank, cuda_status());
}

}  // namespace mddp::tensor
