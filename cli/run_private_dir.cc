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

fs::path temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

// The owner's pid of a name microddp-run-<pid>-XXXXXX, or 0 when it has none.
pid_t owner_of(const std::string& name) {
  if (!name.starts_with(kPrefix)) return 0;
  const std::string rest = name.substr(kPrefix.size());
  const std::size_t dash = rest.find('-');
  if (dash == std::string::npos || dash == 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(rest.c_str(), &end, 10);
  return end == rest.c_str() + dash && pid > 0 ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

int remove_stale_run_dirs() {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temp_base(), ec)) {
    const pid_t owner = owner_of(entry.path().filename().string());
    struct stat st {};
    if (owner == 0 || ::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid())
      continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about)
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm) ++removed;
  }
  return removed;
}

PrivateRunDir::PrivateRunDir() {
  if (const int n = remove_stale_run_dirs(); n > 0)
    spdlog::info("removed {} temporary director{} left by runs that no longer exist", n,
                 n == 1 ? "y" : "ies");
  std::string tmpl = (temp_base() / str(kPrefix, ::getpid(), "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))
    throw Error(str("cannot create a temporary directory ", tmpl, ": ", std::strerror(errno)));
  path_ = tmpl;
}

void PrivateRunDir::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  path_.clear();
}

}  // namespace mddp::cli
