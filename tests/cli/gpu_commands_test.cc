// The GPU commands as users run them: ranks as processes, not threads
// (label gpu). `bench train`, `verify` and the demos fork their ranks
// (cli/local_ranks.h), `run` starts a coordinator and worker processes; each
// must work on GPUs with NCCL between the ranks, and DDP on two GPUs must
// give the model one CPU process trains. On a machine with one GPU the
// one-rank cases run and the two-rank ones report SKIPPED saying what was
// not covered; without a GPU all skip; with a GPU CUDA cannot start on, all FAIL.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/common/check.h"
#include "core/train/safetensors.h"
#include "tests/gpu/devices.h"
#include "tests/support/microddp.h"

namespace mddp::test {
namespace {

namespace fs = std::filesystem;

// A small job every command accepts: seconds on one GPU or CPU core.
const std::string kJob =
    " --dataset synthetic --synthetic-size 512 --width 64 --depth 3 --classes 2 --batch 32 "
    "--optimizer sgd"
    " --lr 0.05 --momentum 0.9 --no-eval";

int microddp(const std::string& args, const fs::path& log) {
  const std::string cmd = str(microddp_binary(), " ", args, " >", log.string(), " 2>&1");
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class GpuCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / str("mddp-gpu-commands-", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs `args`, expects exit 0, shows the output otherwise.
  void ok(const std::string& args) {
    const fs::path log = dir_ / "out.log";
    const int code = microddp(args, log);
    EXPECT_EQ(code, 0) << "microddp " << args << "\n" << std::ifstream(log).rdbuf();
  }
  fs::path dir_;
};

TEST_F(GpuCommands, OneRankOnOneGpu) {
  MDDP_REQUIRE_CUDA_DEVICES(1, "one-rank GPU commands");
  ok("train --device cuda --steps 10" + kJob);
  ok("bench train --device cuda --nproc 1 --width 256 --depth 4 --batch 64 --warmup 2 --iters 5");
  ok(str("run --nproc 1 --device cuda --steps 10 --http-port -1 --run-dir ",
         (dir_ / "run1").string(), kJob));
}

TEST_F(GpuCommands, ForkedRanksOnTwoGpus) {
  MDDP_REQUIRE_CUDA_DEVICES(
      2, "ranks as processes on GPUs (bench train, verify, demo hooks with --nproc 2)");
  ok("bench train --device cuda --nproc 2 --width 256 --depth 4 --batch 64 --warmup 2 --iters 5");
  ok("verify --device cuda --nproc 2 --steps 5");
  ok("demo hooks --device cuda --nproc 2");
  ok("demo bucketing --device cuda --nproc 2 --iters 3");
}

// DDP over NCCL between two worker processes trains the model one CPU
// process trains on the whole batch, within the GPU-vs-CPU tolerance of
// nccl_gpu_test (1e-4 relative: other summation orders, plain FP32 GEMMs).
TEST_F(GpuCommands, RunOnTwoGpusMatchesOneCpuProcess) {
  MDDP_REQUIRE_CUDA_DEVICES(2, "`microddp run --device cuda --nproc 2` against one CPU process");
  const fs::path gpu = dir_ / "gpu", cpu = dir_ / "cpu";
  ok(str("run --nproc 2 --device cuda --steps 20 --http-port -1 --run-dir ", gpu.string(), kJob));
  ok(str("train --device cpu --steps 20 --run-dir ", cpu.string(), kJob));
  const auto a = train::load_safetensors((gpu / "checkpoint.safetensors").string());
  const auto b = train::load_safetensors((cpu / "checkpoint.safetensors").string());
  std::size_t compared = 0;
  for (const auto& t : b.tensors) {  // the model file holds the weights only
    const auto it = std::find_if(a.tensors.begin(), a.tensors.end(),
                                 [&](const auto& u) { return u.name == t.name; });
    ASSERT_NE(it, a.tensors.end()) << t.name << " missing from the GPU run's checkpoint";
    const std::vector<float> x = it->value.to_vector(), y = t.value.to_vector();
    double diff = 0, scale = 1e-12;
    for (std::size_t i = 0; i < y.size(); ++i) {
      diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
      scale = std::max(scale, std::abs(static_cast<double>(y[i])));
    }
    EXPECT_LE(diff / scale, 1e-4) << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace mddp::test
