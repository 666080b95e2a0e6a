// connect_nccl in a build without CUDA (MICRODDP_CUDA=OFF, or no toolkit).
#include "core/comm/nccl/nccl.h"
#include "core/common/check.h"

namespace mddp::comm::nccl {

std::unique_ptr<ProcessGroup> connect_nccl(Store&, int, int, const NcclOptions&) {
  throw InputError(
      "this microddp was built without CUDA, so it has no NCCL backend (rebuild with the CUDA "
      "toolkit present, or -DMICRODDP_CUDA=ON to insist; or use --device cpu / --backend cpu)");
}

NcclFound find_nccl() {
  return {.version = "", .path = "", .error = "this microddp was built without CUDA"};
}

}  // namespace mddp::comm::nccl
