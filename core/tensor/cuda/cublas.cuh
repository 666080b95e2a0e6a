// cuBLAS, opened on first use. Linked at start-up, libcublas and libcublasLt
// cost every microddp process about 200 MB of resident memory (their
// initialisation touches that much: `microddp --help` went from 20 to 237 MB),
// although a CPU job never calls them. So the few entry points microddp uses
// are looked up with dlopen/dlsym when the first GPU context is created.
#pragma once

#include <cublas_v2.h>

namespace mddp::tensor::cuda {

struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  // --precision bf16/fp16: the tensor-op GEMM (spelled out: C++ overloads cublasGemmEx)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  // The GPT's attention (gemm_batched): one call for every head's product.
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long, const void*, cudaDataType, int,
                                            long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded library (loaded once, never unloaded). Throws mddp::Error naming
// the library and dlerror() when it cannot be opened or lacks a symbol. Needs
// no GPU.
const Cublas& cublas();

}  // namespace mddp::tensor::cuda
