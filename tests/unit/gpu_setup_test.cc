// What the GPU path decides before it touches a GPU, tested where there is
// none (label unit): "no GPU" vs "a GPU CUDA cannot start on", which GPU a
// process of each launcher layout takes, the GPU tests' skip-or-fail gate,
// that launchers can ask CUDA without starting it, and the arithmetic
// behind Note [Averaging in 16 bits] (core/comm/nccl/half_scale.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/common/check.h"
#include "core/common/half.h"
#include "core/tensor/cuda_status.h"
#include "core/tensor/local_gpu.h"
#include "mddp/config.h"
#include "tests/gpu/devices.h"

namespace mddp::tensor {
namespace {

namespace fs = std::filesystem;

TEST(CudaStart, NoGpuIsNotAProblem) {
  for (CudaStart s : {CudaStart::kNoDevice, CudaStart::kInsufficientDriver, CudaStart::kFailed}) {
    const CudaStatus st =
        classify_cuda_start(s, 0, "cudaErrorX: x", /*gpu_present=*/false, false, 0, 13000);
    EXPECT_EQ(st.devices, 0);
    EXPECT_FALSE(st.broken()) << st.problem;
  }
  EXPECT_EQ(classify_cuda_start(CudaStart::kOk, 4, "", true, false, 13000, 13000).devices, 4);
}

// The case that used to read as "no CUDA GPU found" and made every GPU test
// SKIP on a broken GPU box: the driver is older than this build's CUDA.
TEST(CudaStart, AGpuWithATooOldDriverIsAProblemThatNamesTheVersions) {
  const CudaStatus st =
      classify_cuda_start(CudaStart::kInsufficientDriver, 0,
                          "cudaErrorInsufficientDriver: CUDA driver version is insufficient",
                          /*gpu_present=*/true, false, 12020, 13000);
  ASSERT_TRUE(st.broken());
  EXPECT_NE(st.problem.find("supports CUDA up to 12.2"), std::string::npos) << st.problem;
  EXPECT_NE(st.problem.find("built with CUDA 13.0"), std::string::npos) << st.problem;
  EXPECT_NE(st.problem.find("install a driver"), std::string::npos) << st.problem;
}

TEST(CudaStart, OtherStartFailuresWithAGpuPresentAreProblems) {
  const CudaStatus st = classify_cuda_start(CudaStart::kFailed, 0,
                                            "cudaErrorSystemNotReady: system not yet initialized",
                                            true, false, 13000, 13000);
  ASSERT_TRUE(st.broken());
  EXPECT_NE(st.problem.find("cudaErrorSystemNotReady"), std::string::npos) << st.problem;
  EXPECT_NE(st.problem.find("nvidia-smi"), std::string::npos) << st.problem;
  // An empty CUDA_VISIBLE_DEVICES hides the GPUs on purpose: no device, no problem.
  EXPECT_FALSE(classify_cuda_start(CudaStart::kNoDevice, 0,
                                   "cudaErrorNoDevice: no CUDA-capable device", true,
                                   /*visible_devices_set=*/true, 13000, 13000)
                   .broken());
  EXPECT_TRUE(classify_cuda_start(CudaStart::kNoDevice, 0,
                                  "cudaErrorNoDevice: no CUDA-capable device", true, false, 13000,
                                  13000)
                  .broken());
}

class FakeMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("mddp-fake-root-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "dev");
    fs::create_directories(root_ / "sys/bus/pci/devices");
  }
  void TearDown() override { fs::remove_all(root_); }
  void pci(const std::string& slot, const std::string& vendor, const std::string& cls) {
    const fs::path d = root_ / "sys/bus/pci/devices" / slot;
    fs::create_directories(d);
    std::ofstream(d / "vendor") << vendor << "\n";
    std::ofstream(d / "class") << cls << "\n";
  }
  fs::path root_;
};

TEST_F(FakeMachine, AnNvidiaGpuIsSeenOnThePciBusWithoutADriver) {
  pci("0000:00:01.0", "0x8086", "0x030000");  // an Intel VGA controller
  pci("0000:00:02.0", "0x10de", "0x040300");  // an NVIDIA audio function
  EXPECT_FALSE(nvidia_gpu_present(root_.string()));
  pci("0000:3b:00.0", "0x10de", "0x030200");  // an NVIDIA 3D controller (data-centre GPUs)
  EXPECT_TRUE(nvidia_gpu_present(root_.string()));
}

TEST_F(FakeMachine, TheDriversDeviceNodesShowAGpu) {
  std::ofstream(root_ / "dev/nvidiactl") << "";
  EXPECT_FALSE(nvidia_gpu_present(root_.string())) << "nvidiactl alone is the driver, not a GPU";
  std::ofstream(root_ / "dev/nvidia0") << "";
  EXPECT_TRUE(nvidia_gpu_present(root_.string()));
}

// The launcher layouts of core/tensor/local_gpu.h.
LocalGpu gpu_for(const std::map<std::string, std::string>& env) {
  return local_gpu([&](const char* var) -> const char* {
    const auto it = env.find(var);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LocalGpu, TorchrunSlurmAndOneGpuPerContainerLayouts) {
  EXPECT_EQ(gpu_for({}).index, 0);
  EXPECT_EQ(gpu_for({{"LOCAL_RANK", "3"}}).index, 3);  // torchrun, microddp run
  EXPECT_EQ(gpu_for({{"SLURM_LOCALID", "2"}, {"SLURM_PROCID", "10"}}).index,
            2);  // srun, 8 GPUs per node
  EXPECT_EQ(gpu_for({{"LOCAL_RANK", "1"}, {"SLURM_LOCALID", "5"}}).index,
            1);  // torchrun inside SLURM
  // One GPU per task or container: it is cuda:0 whatever the local rank.
  EXPECT_EQ(gpu_for({{"LOCAL_RANK", "3"}, {"CUDA_VISIBLE_DEVICES", "3"}}).index, 0);
  EXPECT_EQ(gpu_for({{"SLURM_LOCALID", "1"}, {"CUDA_VISIBLE_DEVICES", "GPU-6a1f0c2e"}}).index, 0);
  // Several visible GPUs: the local rank indexes them.
  EXPECT_EQ(gpu_for({{"LOCAL_RANK", "1"}, {"CUDA_VISIBLE_DEVICES", "4,5"}}).index, 1);
  EXPECT_NE(gpu_for({{"LOCAL_RANK", "1"}}).reason.find("LOCAL_RANK=1"), std::string::npos);
}

TEST(LocalGpu, BadLocalRanksAndTooFewVisibleGpusAreRefusedByName) {
  for (const char* bad : {"", "x", "-1", "1.5", "2 ", "99999999999"}) {
    try {
      gpu_for({{"LOCAL_RANK", bad}});
      ADD_FAILURE() << "LOCAL_RANK='" << bad << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("LOCAL_RANK='"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(gpu_for({{"SLURM_LOCALID", "abc"}}), InputError);
  try {
    gpu_for({{"LOCAL_RANK", "2"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    ADD_FAILURE() << "local rank 2 with two visible GPUs was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("shows only 2 GPU(s)"), std::string::npos) << e.what();
  }
}

// GPU tests fail, not skip, where a GPU is present but CUDA cannot start.
TEST(GpuTestGate, SkipsWithoutAGpuAndFailsOnABrokenOne) {
  EXPECT_EQ(test::gpu_test_gate({2, ""}, 2, true, "x"), "");
  EXPECT_EQ(test::gpu_test_gate({1, ""}, 2, true, "x")
                .rfind("SKIP: needs 2 CUDA GPU(s), this machine has 1", 0),
            0u);
  EXPECT_EQ(
      test::gpu_test_gate({0, ""}, 1, false, "x").rfind("SKIP: no CUDA device: this build", 0), 0u);
  const std::string broken =
      test::gpu_test_gate({0, "an NVIDIA GPU is present but CUDA cannot start"}, 1, true, "x");
  EXPECT_EQ(broken.rfind("FAIL: an NVIDIA GPU is present", 0), 0u) << broken;
}

// Note [CUDA and fork]: a launcher asks CUDA in a child, so it may still
// fork ranks that use CUDA; asking in-process marks CUDA started. Each case
// runs in a fresh child, as the mark is process-wide.
TEST(CudaAndFork, ProbingInAChildLeavesThisProcessFreeToFork) {
  EXPECT_EXIT(
      {
        const CudaStatus probed = probe_cuda_status();
        const bool free_to_fork = !cuda_started();
        const CudaStatus here = cuda_status();
        const bool same = probed.devices == here.devices && probed.problem == here.problem;
        std::exit(free_to_fork && same && (cuda_started() == bool(MDDP_HAVE_CUDA)) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Note [Averaging in 16 bits]: NCCL's average pre-multiplies by 1/n rounded
// to the data type. At n = 3 in bf16 that factor is 0.333984 and every
// average is 1.00195x too large; summing in 16 bits and scaling the sum by
// 1/n in fp32 leaves only unbiased rounding.
TEST(SixteenBitAverage, PremultiplyingBy16BitOneThirdIsBiasedScalingTheSumIsNot) {
  const float third16 = bf16_to_float(float_to_bf16(1.0f / 3.0f));
  EXPECT_NEAR(third16 * 3.0, 1.00195, 1e-5);
  const auto r16 = [](double x) {
    return static_cast<double>(bf16_to_float(float_to_bf16(static_cast<float>(x))));
  };
  double premul = 0, postscale = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    double v[3], exact = 0;
    for (int r = 0; r < 3; ++r)
      exact += (v[r] = r16(1.0 + ((i * 7919 + r * 104729) % 4093) / 4093.0));
    exact /= 3;
    // ncclAvg: each input times bf16(1/3), summed in bf16.
    const double a = r16(r16(r16(v[0] * third16) + r16(v[1] * third16)) + r16(v[2] * third16));
    // microddp: the bf16 sum, then x (1/3) in fp32, rounded once.
    const double b = r16(static_cast<float>(r16(r16(v[0] + v[1]) + v[2])) * (1.0f / 3.0f));
    premul += (a - exact) / exact;
    postscale += (b - exact) / exact;
  }
  EXPECT_GT(premul / kN, 1.5e-3) << "the bias the old path had";
  EXPECT_LT(std::abs(postscale / kN), 2e-4) << "what the GPU test checks for at world 3";
}

}  // namespace
}  // namespace mddp::tensor
