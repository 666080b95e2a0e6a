// The private directory of one `microddp run`: the job's token (0600) and
// the files through which the coordinator tells run its address and
// dashboard URL. Named microddp-run-<pid>-XXXXXX under $TMPDIR, so that a
// later run can tell whether its owner still lives: the constructor first
// removes the ones of processes that are gone (a run killed with SIGKILL, or
// one that crashed), then makes a fresh one; the destructor (or remove(),
// before std::exit) removes it, on success, failure and interruption alike.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace mddp::cli {

class PrivateRunDir {
 public:
  PrivateRunDir();
  ~PrivateRunDir() { remove(); }
  PrivateRunDir(const PrivateRunDir&) = delete;
  PrivateRunDir& operator=(const PrivateRunDir&) = delete;

  const std::string& path() const { return path_; }
  void remove();

 private:
  std::string path_;
};

// Removes $TMPDIR/microddp-run-<pid>-* of this user whose <pid> is not a
// live process. Returns how many it removed.
int remove_stale_run_dirs();

// The log directory of a `run` without --run-dir, kept on failure (its
// error names it): "$TMPDIR/microddp-logs-<pid>-XXXXXX", created. First
// removes the ones of this user older than kKeepLogs whose run is gone.
std::string make_run_logs_dir();
inline constexpr std::chrono::hours kKeepLogs{24};

}  // namespace mddp::cli
