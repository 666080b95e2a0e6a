#include "core/comm/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/comm/types.h"

namespace mddp::comm {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw CommError(str("file store: ", what, " '", path, "': ", std::strerror(errno)));
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InputError(str("file store: '", dir_, "' is not a directory (create it first)"));
}

// Letters, digits, '-' and '_' stay; every other byte becomes %XX, so '/'
// in keys never makes subdirectories and no name starts with '.'.
std::string FileStore::path_of(const std::string& key) const {
  static const char* kHex = "0123456789abcdef";
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  if (name.empty()) name.push_back('%');
  return dir_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = path_of(key);
  // The temporary name starts with '.', which path_of never produces.
  const std::string tmp =
      str(dir_, "/.tmp-", ::getpid(), "-", counter.fetch_add(1), "-", path.substr(dir_.size() + 1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", tmp);
  std::size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write", tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail("cannot rename into", path);
  }
}

std::string FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string path = path_of(key);
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream os;
      os << in.rdbuf();
      return os.str();
    }
    auto now = Clock::now();
    if (now >= deadline)
      throw TimeoutError(str("store: key '", key, "' was not set within ", timeout.count(),
                             " ms (file store in ", dir_,
                             "; a rank that should publish it is missing or late)"));
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
  }
}

}  // namespace mddp::comm
