#include <dlfcn.h>

#include <string>

#include "core/common/check.h"
#include "core/common/shared_library.h"
#include "core/tensor/cuda/cublas.cuh"

namespace mddp::tensor::cuda {
namespace {

// Where PyTorch finds it (the nvidia-cublas wheel, a toolkit,
// LD_LIBRARY_PATH: core/common/shared_library.h), or MDDP_CUBLAS_LIBRARY.
void* open_cublas() {
  LibrarySearch search;
  search.what = "cuBLAS";
  search.soname = str("libcublas.so.", CUBLAS_VER_MAJOR);
  search.env = "MDDP_CUBLAS_LIBRARY";
  search.wheel = "cublas";
  search.built_with = MDDP_CUBLAS_PATH;
  search.install_hint = "pip install nvidia-cublas (or the CUDA toolkit's libraries)";
  return open_library(search);
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
  bind(lib, c.sgemm_strided_batched, "cublasSgemmStridedBatched");
  bind(lib, c.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  bind(lib, c.status_string, "cublasGetStatusString");
  return c;
}

}  // namespace

const Cublas& cublas() {
  static const Cublas loaded = load();  // thread-safe; a failure is retried on the next call
  return loaded;
}

}  // namespace mddp::tensor::cuda
