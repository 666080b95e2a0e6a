// Can this process use a GPU, and has it started CUDA?
//
// Three answers must not be confused (a green CI on a broken GPU box comes
// from confusing the first two):
//  * no GPU here: nothing to run, GPU tests are SKIPPED;
//  * a GPU is here but CUDA cannot start on it (a driver older than this
//    build's CUDA, a driver not loaded, a broken install): every GPU command
//    fails saying so, and GPU tests FAIL;
//  * usable GPUs: how many.
//
// Note [CUDA and fork]
// ~~~~~~~~~~~~~~~~~~~~
// A process that has started CUDA (any runtime call, even counting devices)
// cannot pass it to a child made by fork() without exec: the child's first
// CUDA call fails, usually as "no CUDA-capable device". So a command that
// forks local ranks (cli/local_ranks.h) must not touch CUDA before it forks:
// its checks run in a short-lived child (probe_cuda_status), every CUDA
// entry point of microddp records that CUDA was started (note_cuda_started),
// and the launcher refuses to fork once it was.
#pragma once

#include <string>

namespace mddp::tensor {

struct CudaStatus {
  int devices = 0;      // usable CUDA devices (0 when none, or CUDA cannot start)
  std::string problem;  // non-empty: a GPU is present but CUDA cannot start (why, what to do)
  bool broken() const { return !problem.empty(); }
};

// How CUDA answered the device count, in categories that need no CUDA header.
enum class CudaStart { kOk, kNoDevice, kInsufficientDriver, kFailed };

// Pure: the status from what CUDA said (`start`, `devices` when kOk, its
// error text otherwise), whether the machine shows an NVIDIA GPU, whether
// CUDA_VISIBLE_DEVICES was set (an empty list hides every GPU on purpose),
// and the driver's and this build's CUDA versions (1000*major + 10*minor; 0
// unknown).
CudaStatus classify_cuda_start(CudaStart start, int devices, const std::string& error_text,
                               bool gpu_present, bool visible_devices_set, int driver_version,
                               int runtime_version);

// True when the machine shows an NVIDIA GPU without asking CUDA: a PCI
// display or 3D controller of vendor 0x10de under ROOT/sys/bus/pci/devices,
// or the driver's ROOT/proc/driver/nvidia/gpus/* or ROOT/dev/nvidia<N>.
// `root` is "/" except in tests.
bool nvidia_gpu_present(const std::string& root = "/");

// Asks CUDA in this process (which starts it: Note [CUDA and fork]). In a
// build without CUDA: no devices, and a problem only if a GPU is present.
CudaStatus cuda_status();
// The same answer from a short-lived forked child, so this process never
// starts CUDA. For launchers, before they fork their ranks.
CudaStatus probe_cuda_status();

// Every CUDA entry point of microddp calls note_cuda_started(); cuda_started()
// says whether any did in this process (Note [CUDA and fork]).
void note_cuda_started();
bool cuda_started();

}  // namespace mddp::tensor
