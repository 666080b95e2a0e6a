#include "core/comm/nccl/nccl_library.h"

#include <dlfcn.h>

#include "core/comm/nccl/nccl.h"
#include "core/common/check.h"
#include "core/common/shared_library.h"

namespace mddp::comm::nccl {
namespace {

template <class Fn>
void bind(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn)
    throw InputError(str("the NCCL found lacks ", name, " (older than NCCL ", NCCL_MAJOR, ".",
                         NCCL_MINOR, ", which microddp was built against?)"));
}

NcclLibrary load() {
  void* lib = open_library({.what = "NCCL",
                            .soname = str("libnccl.so.", NCCL_MAJOR),
                            .env = "MDDP_NCCL_LIBRARY",
                            .wheel = "nccl",
                            .built_with = MDDP_NCCL_PATH,
                            .install_hint = "pip install nvidia-nccl-cu13 (or the NCCL package of "
                                            "your CUDA version)"});
  NcclLibrary n;
  bind(lib, n.get_version, "ncclGetVersion");
  bind(lib, n.get_unique_id, "ncclGetUniqueId");
  bind(lib, n.comm_init_rank_config, "ncclCommInitRankConfig");
  bind(lib, n.comm_finalize, "ncclCommFinalize");
  bind(lib, n.comm_destroy, "ncclCommDestroy");
  bind(lib, n.comm_abort, "ncclCommAbort");
  bind(lib, n.comm_get_async_error, "ncclCommGetAsyncError");
  bind(lib, n.get_error_string, "ncclGetErrorString");
  bind(lib, n.get_last_error, "ncclGetLastError");
  bind(lib, n.all_reduce, "ncclAllReduce");
  bind(lib, n.reduce_scatter, "ncclReduceScatter");
  bind(lib, n.all_gather, "ncclAllGather");
  bind(lib, n.broadcast, "ncclBroadcast");
  return n;
}

}  // namespace

const NcclLibrary& nccl_library() {
  static const NcclLibrary loaded = load();
  return loaded;
}

NcclFound find_nccl() {
  NcclFound found;
  try {
    int v = 0;
    nccl_library().get_version(&v);  // MAJOR*10000 + MINOR*100 + PATCH since NCCL 2.9
    found.version = str(v / 10000, ".", v / 100 % 100, ".", v % 100);
    found.path = loaded_library_path("libnccl.so");
  } catch (const Error& e) {
    found.error = e.what();
  }
  return found;
}

}  // namespace mddp::comm::nccl
