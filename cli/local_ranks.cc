#include "cli/local_ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/comm/file_store.h"
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
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      // As torchrun and `microddp run` do: --device cuda gives rank r cuda:r.
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      int code = 0;
      try {
        comm::FileStore store(dir);
        fn(r, store);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: error: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  // Reap in completion order; on the first failure stop the rest (they would
  // otherwise wait for the dead rank until their collective timeout).
  int first_failure = 0;
  for (std::size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0) break;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && first_failure == 0) {
      first_failure = code;
      for (pid_t p : pids)
        if (p != pid) kill(p, SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return first_failure;
}

}  // namespace mddp::cli
