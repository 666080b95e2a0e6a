// `microddp gpu`: what this machine's GPU stack looks like to microddp, the
// first thing to run on a new GPU box (docs/gpu.md): this build's CUDA and
// the GPU architectures it carries, the driver, whether CUDA starts, each
// GPU, and where NCCL and cuBLAS are found (or every place they were looked
// for). Exit status 0 when the GPUs can be used or there are none, 1 when
// a GPU is present but CUDA cannot start on it.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/comm/nccl/nccl.h"
#include "core/common/check.h"
#include "core/common/shared_library.h"
#include "core/tensor/gpu_inventory.h"
#include "mddp/config.h"

namespace mddp::cli {
namespace {

struct GpuReport {
  tensor::GpuInventory inventory;
  comm::nccl::NcclFound nccl;
  std::string cublas;   // its path when it loads, else empty
  std::string verdict;  // "ready", "no GPU" or "broken"
};

GpuReport gather() {
  GpuReport r;
  r.inventory = tensor::gpu_inventory();
  r.nccl = comm::nccl::find_nccl();
  r.cublas = loaded_library_path("libcublas.so");
  const tensor::CudaStatus& s = r.inventory.status;
  r.verdict = s.broken() ? "broken" : s.devices > 0 ? "ready" : "no GPU";
  return r;
}

nlohmann::json to_json(const GpuReport& r) {
  const tensor::GpuInventory& g = r.inventory;
  nlohmann::json devices = nlohmann::json::array();
  for (const tensor::GpuDevice& d : g.devices)
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"memory_bytes", d.memory_bytes},
                       {"compute_capability", str(d.major, ".", d.minor)}});
  return {{"microddp", MDDP_VERSION},
          {"built_with_cuda", g.built_with_cuda},
          {"cuda_architectures", g.built_architectures},
          {"cuda_runtime", tensor::cuda_version_string(g.runtime_version)},
          {"driver_cuda", tensor::cuda_version_string(g.driver_version)},
          {"driver_release", g.driver_release},
          {"verdict", r.verdict},
          {"problem", g.status.problem},
          {"devices", devices},
          {"nccl", {{"version", r.nccl.version}, {"path", r.nccl.path}, {"error", r.nccl.error}}},
          {"cublas", r.cublas}};
}

// "80;90" (CMake's list) as "80, sm_90", after the first "sm_".
std::string sm_list(std::string architectures) {
  for (std::size_t at = architectures.find(';'); at != std::string::npos;
       at = architectures.find(';', at))
    architectures.replace(at, 1, ", sm_");
  return architectures;
}

void print_text(const GpuReport& r) {
  const tensor::GpuInventory& g = r.inventory;
  if (g.built_with_cuda)
    std::printf("microddp %s: CUDA %s, code for sm_%s\n", MDDP_VERSION,
                tensor::cuda_version_string(g.runtime_version).c_str(),
                sm_list(g.built_architectures).c_str());
  else
    std::printf("microddp %s: built without CUDA\n", MDDP_VERSION);
  // A virtual machine or container may hide /proc/driver/nvidia while the
  // driver answers CUDA: then only its release number is unknown.
  const std::string release = !g.driver_release.empty() ? g.driver_release
                              : g.driver_version > 0 ? "release unknown, /proc/driver/nvidia hidden"
                                                     : "not loaded";
  std::printf("driver: %s (CUDA %s)\n", release.c_str(),
              tensor::cuda_version_string(g.driver_version).c_str());
  for (const tensor::GpuDevice& d : g.devices)
    std::printf("cuda:%d: %s, %.1f GiB, compute capability %d.%d\n", d.index, d.name.c_str(),
                d.memory_bytes / double(1 << 30), d.major, d.minor);
  if (r.nccl.error.empty())
    std::printf("NCCL %s: %s\n", r.nccl.version.c_str(), r.nccl.path.c_str());
  else
    std::printf("NCCL: %s\n", r.nccl.error.c_str());
  if (!r.cublas.empty()) std::printf("cuBLAS: %s\n", r.cublas.c_str());
  if (r.verdict == "ready")
    std::printf("ready: %zu GPU%s\n", g.devices.size(), g.devices.size() == 1 ? "" : "s");
  else if (r.verdict == "no GPU")
    std::printf("no GPU: this machine shows no NVIDIA GPU; --device cuda is refused here\n");
}

}  // namespace

void register_gpu(CLI::App& app) {
  auto* cmd = app.add_subcommand("gpu",
                                 "What this machine's GPUs, driver, CUDA and NCCL look like "
                                 "to microddp (run it first on a GPU box)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print the report as JSON (what scripts/gpu-check reads)");
  cmd->callback([json] {
    const GpuReport r = gather();
    if (*json)
      std::printf("%s\n", to_json(r).dump(2).c_str());
    else
      print_text(r);
    if (r.verdict == "broken")
      throw Error(str("a GPU is present but CUDA cannot start: ", r.inventory.status.problem));
  });
}

}  // namespace mddp::cli
