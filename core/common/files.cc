#include "core/common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/common/check.h"

namespace mddp {

std::string write_atomically(const std::string& path, std::string_view text, unsigned mode) {
  // A temporary of this write's own: two writers sharing one would truncate
  // each other's, and the second rename would find it gone.
  static std::atomic<uint64_t> writes{0};
  const std::string tmp = str(path, ".tmp.", ::getpid(), ".", writes++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return std::strerror(errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const int write_errno = done == text.size() ? 0 : (errno != 0 ? errno : EIO);
  const bool ok = write_errno == 0 && ::fsync(fd) == 0;
  const int sync_errno = errno;
  ::close(fd);
  if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) return "";
  const std::string why = std::strerror(!ok ? (write_errno ? write_errno : sync_errno) : errno);
  std::remove(tmp.c_str());
  return why;
}

void make_dirs(const std::string& dir, const char* flag) {
  std::error_code ec;
  if (dir.empty()) throw InputError(str(flag, " is empty: give a directory"));
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw InputError(
        str("cannot create ", flag, " '", dir, "': ", ec ? ec.message() : "not a directory"));
}

}  // namespace mddp
