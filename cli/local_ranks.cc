#include "cli/local_ranks.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/comm/file_store.h"
#include "core/comm/fork_ranks.h"
#include "core/common/check.h"
#include "core/tensor/cuda_status.h"

namespace mddp::cli {

int run_local_ranks(int nproc, const std::function<void(int rank, comm::Store& store)>& fn) {
  if (nproc < 1) throw InputError(str("--nproc must be at least 1, got ", nproc));
  MDDP_CHECK(!tensor::cuda_started(),
             "CUDA was started in this process before it forked its ranks, which then "
             "cannot use it; ask CUDA in a child instead (Note [CUDA and fork] in "
             "core/tensor/cuda_status.h)");
  const std::string dir = make_temp_dir("microddp-ranks");
  // No limit: every wait inside a rank has its own deadline. On the first
  // failure the rest are stopped: they would wait for the dead rank until
  // their collective timeout.
  const comm::ForkResult result =
      comm::fork_ranks(nproc,
                       [&](int r) {
                         // As torchrun and `microddp run` do: --device cuda gives rank r cuda:r.
                         ::setenv("RANK", std::to_string(r).c_str(), 1);
                         ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
                         ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
                         comm::FileStore store(dir);
                         fn(r, store);
                         return 0;
                       },
                       {.stop_others_on_failure = true});
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result.first_failed < 0 ? 0 : result.ranks[result.first_failed].code();
}

}  // namespace mddp::cli
