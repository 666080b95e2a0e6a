#include "core/tensor/cuda_status.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/common/check.h"
#include "mddp/config.h"
#if MDDP_HAVE_CUDA
#include "core/tensor/cuda/cuda_runtime.h"
#endif

namespace mddp::tensor {
namespace {

std::atomic<bool> g_cuda_started{false};

std::string version_str(int v) {
  return str(v / 1000, ".", v % 1000 / 10);
}

std::string read_first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

CudaStatus classify_cuda_start(CudaStart start, int devices, const std::string& error_text,
                               bool gpu_present, bool visible_devices_set, int driver_version,
                               int runtime_version) {
  if (start == CudaStart::kOk) {
    if (devices > 0 || !gpu_present || visible_devices_set) return {devices, ""};
    return {
        0, "an NVIDIA GPU is present but CUDA reports no device; check the driver with nvidia-smi"};
  }
  // An empty or unknown CUDA_VISIBLE_DEVICES hides the GPUs on purpose.
  if (!gpu_present || (start == CudaStart::kNoDevice && visible_devices_set)) return {0, ""};
  std::string why = str("an NVIDIA GPU is present but CUDA cannot start (", error_text, ")");
  if (start == CudaStart::kInsufficientDriver && driver_version > 0 && runtime_version > 0)
    why += str(": the driver supports CUDA up to ", version_str(driver_version),
               ", this microddp was built with CUDA ", version_str(runtime_version),
               "; install a driver that supports CUDA ", version_str(runtime_version), " or newer");
  else if (start == CudaStart::kInsufficientDriver)
    why +=
        ": the NVIDIA driver is missing or too old for this build's CUDA; install or update it "
        "(nvidia-smi shows it)";
  else
    why +=
        "; check the driver with nvidia-smi (a GPU in a bad state, a container without the device "
        "nodes, or a "
        "driver/library mismatch after an update that needs a reboot)";
  return {0, why};
}

bool nvidia_gpu_present(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base(root);
  if (!fs::is_empty(base / "proc/driver/nvidia/gpus", ec) && !ec) return true;
  ec.clear();
  // /dev/nvidia0, nvidia1, ... (not nvidiactl, nvidia-uvm: present without a GPU too).
  const auto is_gpu_node = [](const std::string& name) {
    constexpr std::string_view prefix = "nvidia";
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
           std::all_of(name.begin() + prefix.size(), name.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  for (const auto& e : fs::directory_iterator(base / "dev", ec))
    if (is_gpu_node(e.path().filename().string())) return true;
  ec.clear();
  // PCI class 0x0300 (VGA) or 0x0302 (3D controller), vendor 0x10de: found
  // even when the driver is not loaded at all.
  for (const auto& e : fs::directory_iterator(base / "sys/bus/pci/devices", ec)) {
    const std::string vendor = read_first_line(e.path() / "vendor"),
                      cls = read_first_line(e.path() / "class");
    if (vendor == "0x10de" && (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0))
      return true;
  }
  return false;
}

CudaStatus cuda_status() {
  // Asked once: neither the driver nor the process's CUDA_VISIBLE_DEVICES
  // changes while it runs, and tensors ask on every allocation.
  static const CudaStatus status = [] {
    int devices = 0, driver = 0, runtime = 0;
    std::string error = "this build has no CUDA support";
    CudaStart start = CudaStart::kInsufficientDriver;
#if MDDP_HAVE_CUDA
    start = cuda::query_devices(&devices, &error, &driver, &runtime);
#endif
    const bool present = start == CudaStart::kOk && devices > 0 ? true : nvidia_gpu_present();
    CudaStatus s =
        classify_cuda_start(start, devices, error, present,
                            std::getenv("CUDA_VISIBLE_DEVICES") != nullptr, driver, runtime);
    if (!MDDP_HAVE_CUDA && s.broken())
      s.problem =
          "an NVIDIA GPU is present but this microddp was built without CUDA (configure with the "
          "CUDA toolkit)";
    return s;
  }();
  return status;
}

CudaStatus probe_cuda_status() {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(str("pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(str("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::close(fds[0]);
    const CudaStatus s = cuda_status();
    const std::string out = str(s.devices, "\n", s.problem);
    [[maybe_unused]] const ssize_t n = ::write(fds[1], out.data(), out.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::string reply;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::size_t nl = reply.find('\n');
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || nl == std::string::npos)
    return {0, str("asking CUDA for its devices crashed (",
                   WIFSIGNALED(status) ? str("signal ", WTERMSIG(status))
                                       : str("status ", WEXITSTATUS(status)),
                   "); check the driver with nvidia-smi")};
  return {std::atoi(reply.substr(0, nl).c_str()), reply.substr(nl + 1)};
}

void note_cuda_started() {
  g_cuda_started.store(true, std::memory_order_relaxed);
}
bool cuda_started() {
  return g_cuda_started.load(std::memory_order_relaxed);
}

}  // namespace mddp::tensor
