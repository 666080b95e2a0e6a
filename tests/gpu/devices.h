// Device-parameterised tests. A suite declared with MDDP_DEVICE_TEST_SUITE(S)
// runs every TEST_P(S, ...) once per device: "cpu", and "cuda0", which is
// reported SKIPPED, with the reason, where this build has no CUDA or this
// machine no GPU. It never passes without running.
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

// Why cuda:0 cannot be used here; empty when it can.
inline std::string cuda_unavailable_reason() {
  if (!MDDP_HAVE_CUDA)
    return "no CUDA device: this build has no CUDA support (configure with the CUDA toolkit)";
  if (tensor::cuda_device_count() == 0)
    return "no CUDA device: cuda_device_count() is 0 on this machine";
  return "";
}

class DeviceTest : public ::testing::TestWithParam<tensor::Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) {
      const std::string why = cuda_unavailable_reason();
      if (!why.empty()) GTEST_SKIP() << why;
    }
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
