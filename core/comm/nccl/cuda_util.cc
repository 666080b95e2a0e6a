#include "core/comm/nccl/cuda_util.h"

#include <cmath>

#include "core/comm/nccl/nccl_library.h"
#include "core/common/timer.h"

namespace mddp::comm::nccl {

std::string Where::str() const {
  return mddp::str("rank ", rank, " (cuda:", device, ")");
}

std::exception_ptr cuda_error(cudaError_t err, const char* call, const Where& where) {
  cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  return std::make_exception_ptr(CommError(str(
      where.str(), ": ", call, " failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err))));
}

void check_cuda(cudaError_t err, const char* call, const Where& where) {
  if (err != cudaSuccess) std::rethrow_exception(cuda_error(err, call, where));
}

std::exception_ptr nccl_error(ncclResult_t result, const std::string& call, ncclComm_t comm,
                              const Where& where) {
  const char* last = nccl_library().get_last_error(comm);
  std::string message =
      str(where.str(), ": ", call, " failed: ", nccl_library().get_error_string(result));
  if (last && *last) message += str(" (", last, ")");
  switch (result) {
    case ncclRemoteError:
      return std::make_exception_ptr(PeerError(
          message +
          "\n  hint: another rank failed or its process died; its own error names the cause"));
    case ncclSystemError:
      return std::make_exception_ptr(
          CommError(message +
                    "\n  hint: a network or system call failed; rerun with NCCL_DEBUG=INFO (and "
                    "NCCL_SOCKET_IFNAME=<interface> if the hosts have several networks)"));
    default:
      return std::make_exception_ptr(
          CommError(message + "\n  hint: rerun with NCCL_DEBUG=INFO for NCCL's log"));
  }
}

ncclDataType_t to_nccl(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
  }
  throw Error(str("no NCCL type for ", to_string(t)));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  throw Error(str("no NCCL op for ", to_string(op)));
}

bool is_device_memory(const void* p, int* device, const Where& where) {
  cudaPointerAttributes attr{};
  check_cuda(cudaPointerGetAttributes(&attr, p), "cudaPointerGetAttributes", where);
  *device = attr.device;
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

ClockAnchor::ClockAnchor(cudaStream_t idle_stream, const Where& where) : where_(where) {
  check_cuda(cudaEventCreate(&event_), "cudaEventCreate", where_);
  const int64_t before = now_ns();
  check_cuda(cudaEventRecord(event_, idle_stream), "cudaEventRecord", where_);
  check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize", where_);
  const int64_t after = now_ns();
  host_ns_ = before + (after - before) / 2;
}

ClockAnchor::~ClockAnchor() {
  cudaEventDestroy(event_);
}

int64_t ClockAnchor::to_ns(cudaEvent_t e) const {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, event_, e), "cudaEventElapsedTime", where_);
  return host_ns_ + std::llround(static_cast<double>(ms) * 1e6);
}

}  // namespace mddp::comm::nccl
