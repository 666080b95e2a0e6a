// Device-parameterised tests. A suite declared with MDDP_DEVICE_TEST_SUITE(S)
// runs every TEST_P(S, ...) once per device: "cpu", and "cuda0", which is
// reported SKIPPED, with the reason, where this build has no CUDA or this
// machine no GPU — and FAILS where a GPU is present but CUDA cannot start
// (a too-old driver must not make a GPU box look like a CPU one). It never
// passes without running.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "core/tensor/device.h"
#include "core/tensor/tensor.h"
#include "mddp/config.h"

namespace mddp::tensor {
// Test names and failure messages show "cpu" / "cuda:0", not the bytes.
inline void PrintTo(const Device& device, std::ostream* os) {
  *os << device.str();
}
}  // namespace mddp::tensor

namespace mddp::test {

// The gate of every GPU test, given what CUDA said: "" when `needed` devices
// can be used; otherwise why not, as "SKIP: ..." (no GPU, fewer GPUs, no
// CUDA in this build) or "FAIL: ..." (a GPU is present but CUDA cannot start).
inline std::string gpu_test_gate(const tensor::CudaStatus& status, int needed, bool built_with_cuda,
                                 const std::string& what) {
  if (status.broken()) return "FAIL: " + status.problem;
  if (!built_with_cuda)
    return "SKIP: no CUDA device: this build has no CUDA support (configure with the CUDA "
           "toolkit); " +
           what + " is untested here";
  if (status.devices < needed)
    return "SKIP: needs " + std::to_string(needed) + " CUDA GPU(s), this machine has " +
           std::to_string(status.devices) + ": " + what + " is untested here";
  return "";
}

// In a TEST body: skips or fails as gpu_test_gate says.
#define MDDP_REQUIRE_CUDA_DEVICES(n, what)                                                       \
  do {                                                                                           \
    const std::string gate_ =                                                                    \
        ::mddp::test::gpu_test_gate(::mddp::tensor::cuda_status(), (n), MDDP_HAVE_CUDA, (what)); \
    if (gate_.rfind("FAIL: ", 0) == 0) GTEST_FAIL() << gate_.substr(6);                          \
    if (!gate_.empty()) GTEST_SKIP() << gate_.substr(6);                                         \
  } while (0)

class DeviceTest : public ::testing::TestWithParam<tensor::Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) MDDP_REQUIRE_CUDA_DEVICES(GetParam().index + 1, "this op on the GPU");
  }
  tensor::Device device() const { return GetParam(); }
  // A copy of a host tensor on the device under test.
  tensor::Tensor put(const tensor::Tensor& host) const { return host.to(GetParam()); }
};

inline std::string device_name(const ::testing::TestParamInfo<tensor::Device>& info) {
  return info.param.is_cpu() ? "cpu" : "cuda" + std::to_string(info.param.index);
}

}  // namespace mddp::test

#define MDDP_DEVICE_TEST_SUITE(Suite)                                                  \
  class Suite : public ::mddp::test::DeviceTest {};                                    \
  INSTANTIATE_TEST_SUITE_P(                                                            \
      Devices, Suite,                                                                  \
      ::testing::Values(::mddp::tensor::Device{},                                      \
                        ::mddp::tensor::Device{::mddp::tensor::DeviceType::kCuda, 0}), \
      ::mddp::test::device_name)
