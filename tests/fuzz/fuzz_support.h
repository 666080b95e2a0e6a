// What the fuzz targets share (see README.md). Each target is one
// LLVMFuzzerTestOneInput: libFuzzer drives it in the fuzz build, and
// replay_main.cc runs it on the checked-in inputs in every other build.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/common/check.h"

namespace mddp::fuzz {

// A file holding the input, for readers that take a path: an anonymous
// memfd, named by its /proc/self/fd path, gone when this is.
class InputFile {
 public:
  InputFile(const uint8_t* data, std::size_t size)
      : fd_(::memfd_create("fuzz-input", MFD_CLOEXEC)) {
    MDDP_CHECK(fd_ >= 0, "memfd_create failed");
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      MDDP_CHECK(n > 0, "writing the fuzz input failed");
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// Runs `f` on hostile input. mddp::Error is the documented refusal of bad
// input; any other exception (an internal check, a library's own) escapes
// and is a finding, as is a crash, a leak or undefined behaviour.
template <class F>
void refusals_allowed(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

// A property the target asserts (a round trip, a bound): a finding when false.
#define MDDP_FUZZ_ASSERT(cond)     \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

}  // namespace mddp::fuzz
