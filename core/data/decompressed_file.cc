#include "core/data/decompressed_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/common/check.h"

namespace mddp::data {
namespace {
constexpr std::size_t kInputChunk = 1 << 18;
constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
}  // namespace

DecompressedFile::DecompressedFile(const std::string& path) : path_(path), in_(kInputChunk) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(str(path, ": no such file"));
  if (std::filesystem::is_directory(path, ec))
    throw InputError(str(path, ": is a directory, expected an IDX file"));
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr)
    throw InputError(str(path, ": cannot open for reading (", std::strerror(errno), ")"));
  refill();
  gzip_ = z_.avail_in >= 2 && std::memcmp(z_.next_in, kGzipMagic, 2) == 0;
  // 16 + MAX_WBITS: gzip framing, so inflate checks each member's CRC-32 and length.
  if (gzip_ && inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
    std::fclose(file_);
    throw InputError(str(path, ": zlib cannot start decompressing"));
  }
}

DecompressedFile::~DecompressedFile() {
  if (gzip_) inflateEnd(&z_);
  std::fclose(file_);
}

void DecompressedFile::corrupt(const std::string& why) const {
  throw InputError(str(path_, ": corrupt file: ", why, " (re-download or reinstall it)"));
}

bool DecompressedFile::refill() {
  if (z_.avail_in > 0) return true;
  const std::size_t got = std::fread(in_.data(), 1, in_.size(), file_);
  if (got == 0 && std::ferror(file_))
    throw InputError(str(path_, ": read error (", std::strerror(errno), ")"));
  z_.next_in = in_.data();
  z_.avail_in = static_cast<uInt>(got);
  return got > 0;
}

int64_t DecompressedFile::inflate_some(unsigned char* dst, int64_t n) {
  z_.next_out = dst;
  z_.avail_out = static_cast<uInt>(std::min<int64_t>(n, int64_t{1} << 30));
  while (z_.next_out == dst) {
    if (!refill()) {
      if (member_open_) corrupt("the gzip data ends in the middle of a member");
      return 0;
    }
    if (!member_open_) {
      // A new member starts here: anything else after the last one is garbage.
      if (z_.avail_in >= 2 ? std::memcmp(z_.next_in, kGzipMagic, 2) != 0
                           : z_.next_in[0] != kGzipMagic[0])
        corrupt("bytes after the end of the gzip data that are not another gzip member");
      inflateReset(&z_);
      member_open_ = true;
    }
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      member_open_ = false;  // zlib has checked this member's CRC-32 and length
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      corrupt(str("gzip data: ", z_.msg ? z_.msg : "inflate failed"));
    }
  }
  return z_.next_out - dst;
}

int64_t DecompressedFile::read_some(unsigned char* dst, int64_t n) {
  int64_t got;
  if (gzip_) {
    got = inflate_some(dst, n);
  } else {
    // Plain: the bytes refill() already buffered, then the file.
    got = std::min<int64_t>(n, z_.avail_in);
    std::memcpy(dst, z_.next_in, static_cast<std::size_t>(got));
    z_.next_in += got;
    z_.avail_in -= static_cast<uInt>(got);
    if (got == 0) {
      got = static_cast<int64_t>(std::fread(dst, 1, static_cast<std::size_t>(n), file_));
      if (got == 0 && std::ferror(file_))
        throw InputError(str(path_, ": read error (", std::strerror(errno), ")"));
    }
  }
  sha_.update(dst, static_cast<std::size_t>(got));
  return got;
}

void DecompressedFile::read_exact(void* dst, int64_t n, const char* what) {
  if (const int64_t done = read_up_to(dst, n); done < n)
    throw InputError(str(path_, ": truncated file: the ", what, " needs ", n, " bytes but only ",
                         done, " are there (re-download or re-extract it)"));
}

int64_t DecompressedFile::read_up_to(void* dst, int64_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  int64_t done = 0;
  for (int64_t got; done < n && (got = read_some(out + done, n - done)) > 0;) done += got;
  return done;
}

void DecompressedFile::expect_end(const std::string& described) {
  std::vector<unsigned char> scratch(kInputChunk);
  int64_t extra = 0;
  for (int64_t got; (got = read_some(scratch.data(), static_cast<int64_t>(scratch.size()))) > 0;)
    extra += got;
  if (extra > 0)
    corrupt(str(extra, " more byte", extra == 1 ? "" : "s", gzip_ ? " (decompressed)" : "",
                " after ", described));
}

}  // namespace mddp::data
