// The bytes of a file as a reader should see them: a plain file as it is, or
// a gzip file decompressed. Unlike zlib's gzread, which stops where the
// caller stops and ignores whatever follows the last gzip member, this reads
// every member to its end, so each one's CRC-32 and length are checked, and
// expect_end() turns bytes beyond what the caller asked for (decompressed
// ones, or compressed ones that are not another member) into an error.
// Every byte handed out also goes into a SHA-256 of the decompressed content
// (what the known sums of datasets are computed over: a recompressed copy
// has the same one). Errors are InputError naming the file.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/common/sha256.h"

namespace mddp::data {

class DecompressedFile {
 public:
  explicit DecompressedFile(const std::string& path);
  ~DecompressedFile();
  DecompressedFile(const DecompressedFile&) = delete;
  DecompressedFile& operator=(const DecompressedFile&) = delete;

  // Reads exactly `n` bytes or throws, saying what was being read.
  void read_exact(void* dst, int64_t n, const char* what);
  // Reads `n` bytes, or fewer at the end of the file; returns how many.
  int64_t read_up_to(void* dst, int64_t n);
  // Reads to the end of the file; throws when anything is left: `described`
  // names what the bytes read so far were (e.g. "the 47040016 bytes its
  // header describes").
  void expect_end(const std::string& described);
  // SHA-256 of the bytes read so far, as hex. Call once, after expect_end().
  std::string sha256() { return sha_.hex(); }

 private:
  // Up to `n` bytes into dst; 0 only at the end of the file.
  int64_t read_some(unsigned char* dst, int64_t n);
  int64_t inflate_some(unsigned char* dst, int64_t n);
  bool refill();  // more compressed input; false at the end of the file
  [[noreturn]] void corrupt(const std::string& why) const;

  std::string path_;
  std::FILE* file_ = nullptr;
  bool gzip_ = false;
  bool member_open_ = false;  // inside a gzip member (its trailer not yet checked)
  z_stream z_{};
  std::vector<unsigned char> in_;
  Sha256 sha_;
};

}  // namespace mddp::data
