#include "cli/run_private_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/common/check.h"
#include "core/common/log.h"

namespace mddp::cli {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kPrefix = "microddp-run-";
constexpr std::string_view kLogsPrefix = "microddp-logs-";

fs::path temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

// The owner's pid of a name <prefix><pid>-XXXXXX, or 0 when it has none.
pid_t owner_of(const std::string& name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return 0;
  const std::string rest = name.substr(prefix.size());
  const std::size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(rest.c_str(), &end, 10);
  return end == rest.c_str() + dash && pid > 0 ? static_cast<pid_t>(pid) : 0;
}

// Removes $TMPDIR/<prefix><pid>-* of this user whose <pid> is not a live
// process and that were last changed at least `min_age` ago.
int remove_stale_dirs(std::string_view prefix, std::chrono::seconds min_age) {
  int removed = 0;
  std::error_code ec;
  const auto now = std::chrono::system_clock::now();
  for (const auto& entry : fs::directory_iterator(temp_base(), ec)) {
    const pid_t owner = owner_of(entry.path().filename().string(), prefix);
    struct stat st {};
    if (owner == 0 || ::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid())
      continue;
    if (now - std::chrono::system_clock::from_time_t(st.st_mtime) < min_age) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about)
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

// "$TMPDIR/<prefix><this pid>-XXXXXX", created.
std::string make_owned_dir(std::string_view prefix) {
  std::string tmpl = (temp_base() / str(prefix, ::getpid(), "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    throw Error(str("cannot create a temporary directory ", tmpl, ": ", std::strerror(errno)));
  return tmpl;
}

}  // namespace

int remove_stale_run_dirs() {
  return remove_stale_dirs(kPrefix, std::chrono::seconds(0));
}

std::string make_run_logs_dir() {
  if (const int n = remove_stale_dirs(kLogsPrefix, kKeepLogs); n > 0)
    spdlog::info("removed {} log director{} of failed runs older than a day", n,
                 n == 1 ? "y" : "ies");
  return make_owned_dir(kLogsPrefix);
}

PrivateRunDir::PrivateRunDir() {
  if (const int n = remove_stale_run_dirs(); n > 0)
    spdlog::info("removed {} temporary director{} left by runs that no longer exist", n,
                 n == 1 ? "y" : "ies");
  path_ = make_owned_dir(kPrefix);
}

void PrivateRunDir::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  path_.clear();
}

}  // namespace mddp::cli
