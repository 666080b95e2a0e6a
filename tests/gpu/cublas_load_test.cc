// cuBLAS is opened on first use (core/tensor/cuda/cublas.cu), not linked:
// check, on any machine with the toolkit (no GPU needed), that the library
// opens and every entry point microddp calls resolves; and that merely
// starting microddp no longer maps it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/tensor/cuda/cublas.cuh"

namespace mddp::tensor::cuda {
namespace {

bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

TEST(Cublas, OpensOnFirstUseWithEveryEntryPoint) {
  EXPECT_FALSE(mapped("libcublas")) << "cuBLAS is mapped before first use: is it linked again?";
  const Cublas& c = cublas();
  EXPECT_TRUE(mapped("libcublas"));
  EXPECT_NE(c.create, nullptr);
  EXPECT_NE(c.set_stream, nullptr);
  EXPECT_NE(c.set_workspace, nullptr);
  EXPECT_NE(c.set_math_mode, nullptr);
  EXPECT_NE(c.sgemm, nullptr);
  ASSERT_NE(c.status_string, nullptr);
  EXPECT_NE(std::string(c.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).find("not initialized"),
            std::string::npos);
  EXPECT_EQ(&cublas(), &c) << "loaded once";
}

}  // namespace
}  // namespace mddp::tensor::cuda
