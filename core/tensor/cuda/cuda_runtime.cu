#include <cuda_runtime.h>

#include <string>

#include "core/common/check.h"
#include "core/tensor/cuda/check.cuh"
#include "core/tensor/cuda/context.cuh"
#include "core/tensor/cuda/cuda_runtime.h"

namespace mddp::tensor::cuda {
namespace {

// Makes `device` the calling thread's current device for its lifetime and
// then restores the one that was current, so a tensor allocated or freed on
// one GPU never moves another thread-local choice (the NCCL group's, a
// caller's) to it.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    note_cuda_started();
    MDDP_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) MDDP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~CurrentDevice() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

CudaStart query_devices(int* devices, std::string* error, int* driver_version,
                        int* runtime_version) {
  note_cuda_started();
  *devices = 0;
  *driver_version = *runtime_version = 0;
  if (cudaDriverGetVersion(driver_version) != cudaSuccess) *driver_version = 0;
  *runtime_version = CUDART_VERSION;
  const cudaError_t err = cudaGetDeviceCount(devices);
  if (err == cudaSuccess) return CudaStart::kOk;
  *devices = 0;
  *error = str(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  cudaGetLastError();  // clear the sticky "no driver" error
  switch (err) {
    case cudaErrorNoDevice:
      return CudaStart::kNoDevice;
    case cudaErrorInsufficientDriver:
      return CudaStart::kInsufficientDriver;
    default:
      return CudaStart::kFailed;
  }
}

void versions(int* driver_version, int* runtime_version) {
  note_cuda_started();
  if (cudaDriverGetVersion(driver_version) != cudaSuccess) *driver_version = 0;
  *runtime_version = CUDART_VERSION;
}

void describe_device(int device, std::string* name, int64_t* memory_bytes, int* major, int* minor) {
  note_cuda_started();
  cudaDeviceProp prop{};
  MDDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  *name = prop.name;
  *memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  *major = prop.major;
  *minor = prop.minor;
}

void* allocate(std::size_t bytes, int device) {
  CurrentDevice on(device);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw Error(str("out of GPU memory allocating ", bytes, " bytes on cuda:", device,
                    " (use a smaller --batch or model)"));
  }
  MDDP_CUDA_CHECK(err);
  return ptr;
}

// cudaFree waits for the whole device, so no queued kernel can still be
// using the memory when it is released.
void free(void* ptr, int device) noexcept {
  try {
    CurrentDevice on(device);
    cudaFree(ptr);
  } catch (const Error&) {
    // The device is gone (the process is exiting after a fault): nothing to free.
  }
}

void copy(void* dst, const void* src, std::size_t bytes, int device) {
  const Context& ctx = context(device);
  MDDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx.stream));
  note_host_wait();
  MDDP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

struct Upload {
  void* host = nullptr;  // pinned: the copy engine reads it while the host goes on
  cudaEvent_t copied = nullptr;
};

Upload* upload_create(std::size_t bytes, int device) {
  CurrentDevice on(device);
  auto* u = new Upload;
  const cudaError_t err = cudaMallocHost(&u->host, bytes == 0 ? 64 : bytes);
  if (err != cudaSuccess) {
    delete u;
    MDDP_CUDA_CHECK(err);
  }
  MDDP_CUDA_CHECK(cudaEventCreateWithFlags(&u->copied, cudaEventDisableTiming));
  return u;
}

void upload_destroy(Upload* u, int device) noexcept {
  if (!u) return;
  try {
    CurrentDevice on(device);
    cudaEventSynchronize(u->copied);  // never free memory a queued copy still reads
    cudaEventDestroy(u->copied);
    cudaFreeHost(u->host);
  } catch (const Error&) {
  }
  delete u;
}

void* upload_buffer(Upload* u) {
  const cudaError_t q = cudaEventQuery(u->copied);  // never recorded: cudaSuccess
  if (q == cudaErrorNotReady) {
    note_host_wait();
    MDDP_CUDA_CHECK(cudaEventSynchronize(u->copied));
  } else {
    MDDP_CUDA_CHECK(q);
  }
  return u->host;
}

void upload_queue(Upload* u, void* dst, std::size_t bytes, int device) {
  const Context& ctx = context(device);
  MDDP_CUDA_CHECK(cudaMemcpyAsync(dst, u->host, bytes, cudaMemcpyHostToDevice, ctx.stream));
  MDDP_CUDA_CHECK(cudaEventRecord(u->copied, ctx.stream));
}

}  // namespace mddp::tensor::cuda
