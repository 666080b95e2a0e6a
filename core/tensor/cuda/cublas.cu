#include <dlfcn.h>

#include <string>

#include "core/common/check.h"
#include "core/tensor/cuda/cublas.cuh"

namespace mddp::tensor::cuda {
namespace {

// The soname of the cuBLAS this was compiled against, found through the
// binary's run path like any linked library; then the build's own copy.
void* open_cublas() {
  const std::string soname = str("libcublas.so.", CUBLAS_VER_MAJOR);
  if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string first_error = dlerror();
  if (void* lib = dlopen(MDDP_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL)) return lib;
  throw Error(str(
      "cannot load cuBLAS (", soname, ": ", first_error, "; ", MDDP_CUBLAS_PATH, ": ", dlerror(),
      "): install the CUDA toolkit's libraries or add their folder to LD_LIBRARY_PATH"));
}

template <class Fn>
void bind(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn)
    throw Error(str("cuBLAS lacks ", name, ": ", dlerror(),
                    " (a cuBLAS older than the one built against?)"));
}

Cublas load() {
  void* lib = open_cublas();
  Cublas c;
  bind(lib, c.create, "cublasCreate_v2");
  bind(lib, c.set_stream, "cublasSetStream_v2");
  bind(lib, c.set_workspace, "cublasSetWorkspace_v2");
  bind(lib, c.set_math_mode, "cublasSetMathMode");
  bind(lib, c.sgemm, "cublasSgemm_v2");
  bind(lib, c.gemm_ex, "cublasGemmEx");
  bind(lib, c.status_string, "cublasGetStatusString");
  return c;
}

}  // namespace

const Cublas& cublas() {
  static const Cublas loaded = load();  // thread-safe; a failure is retried on the next call
  return loaded;
}

}  // namespace mddp::tensor::cuda
