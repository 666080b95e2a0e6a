// The launcher `bench train`, `verify` and the demos share (cli/local_ranks.h)
// forks its ranks without exec, so a child could not use CUDA if the parent
// had started it (Note [CUDA and fork] in core/tensor/cuda_status.h). It
// refuses to fork then, loudly, instead of leaving every rank to report "no
// CUDA GPU found". Each case runs in a fresh child: the mark is process-wide.
#include "cli/local_ranks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "core/common/check.h"
#include "core/tensor/cuda_status.h"

namespace mddp::cli {
namespace {

TEST(LocalRanks, ForkRanksThatEachRunAndReportBack) {
  EXPECT_EQ(
      run_local_ranks(3, [](int rank, comm::Store& store) { store.set(str("r", rank), "ok"); }), 0);
  EXPECT_EQ(run_local_ranks(2,
                            [](int rank, comm::Store&) {
                              if (rank == 1) ::_exit(7);
                            }),
            7);
}

TEST(LocalRanks, RefuseToForkOnceCudaWasStartedInThisProcess) {
  EXPECT_EXIT(
      {
        tensor::probe_cuda_status();  // asks in a child: still free to fork
        if (run_local_ranks(1, [](int, comm::Store&) {}) != 0) std::exit(2);
        tensor::note_cuda_started();  // as any CUDA call of microddp's does
        try {
          run_local_ranks(1, [](int, comm::Store&) {});
        } catch (const std::logic_error& e) {
          std::exit(std::string(e.what()).find("CUDA was started in this process") !=
                            std::string::npos
                        ? 0
                        : 3);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mddp::cli
