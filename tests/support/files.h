// The files and directories of a test: a temporary directory that removes
// itself (TempDir), a fresh path named for the test, and a file read whole.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mddp::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the object dies (in the process that created it, not in forked ranks).
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mddp-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp(" + tmpl + ") failed: " + std::strerror(errno));
    path_ = tmpl;
    owner_ = ::getpid();
  }
  ~TempDir() {
    if (::getpid() != owner_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  pid_t owner_ = 0;
};

// A path in the temporary directory, "mddp-test-NAME-PID", with nothing at
// it: for a test that makes the file or directory itself (or must not find one).
inline std::filesystem::path fresh_path(const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("mddp-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p;
}

// The same path, made an empty directory.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path p = fresh_path(name);
  std::filesystem::create_directories(p);
  return p;
}

// Every byte of the file at `path` ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace mddp::test
