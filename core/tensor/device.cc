#include "core/tensor/device.h"

#include <cstdlib>

#include "core/common/check.h"
#include "core/tensor/cuda/cuda_runtime.h"
#include "mddp/config.h"

namespace mddp::tensor {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return {};
  if (text == "cuda") {
    const char* local_rank = std::getenv("LOCAL_RANK");
    return {DeviceType::kCuda, local_rank ? std::atoi(local_rank) : 0};
  }
  if (text.rfind("cuda:", 0) == 0) {
    const std::string idx = text.substr(5);
    if (!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos)
      return {DeviceType::kCuda, std::stoi(idx)};
  }
  throw InputError("unknown device '" + text + "' (use cpu, cuda or cuda:K)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

int cuda_device_count() {
#if MDDP_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

void require_available(const Device& device) {
  if (device.is_cpu()) return;
  if (!MDDP_HAVE_CUDA)
    throw InputError("--device " + device.str() +
                     ": this microddp was built without CUDA (configure with the CUDA toolkit "
                     "present, or use --device cpu)");
  const int n = cuda_device_count();
  if (n == 0) throw InputError("--device " + device.str() + ": no CUDA GPU found on this machine (use --device cpu)");
  if (device.index >= n)
    throw InputError(str("--device ", device.str(), ": only ", n, " CUDA device(s) present"));
}

void require_gpu_per_local_rank(const std::string& device_text, int local_ranks) {
  const Device device = Device::parse(device_text);
  if (device.is_cpu()) return;
  if (device_text != "cuda" && local_ranks > 1)
    throw InputError(str("--device ", device_text, " puts all ", local_ranks,
                         " ranks on one GPU, and NCCL needs a GPU per rank: use --device cuda "
                         "(rank r on cuda:r) or run one rank"));
  if (device_text == "cuda") {
    gpu_of_local_rank(local_ranks - 1);
  } else {
    require_available(device);
  }
}

Device gpu_of_local_rank(int local_rank) {
  const Device device{DeviceType::kCuda, local_rank};
  // Without a GPU (or CUDA) require_available gives the clearer message.
  if (const int n = cuda_device_count(); n > 0 && local_rank >= n)
    throw InputError(str("--device cuda gives local rank ", local_rank, " cuda:", local_rank, ", but this host has ", n,
                         " GPU(s): NCCL needs a GPU per rank, so start at most ", n, " rank(s) on this host"));
  require_available(device);
  return device;
}

}  // namespace mddp::tensor
