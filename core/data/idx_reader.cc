#include "core/data/idx_reader.h"

#include <algorithm>
#include <array>
#include <iomanip>
#include <sstream>

#include "core/common/check.h"
#include "core/data/decompressed_file.h"

namespace mddp::data {
namespace {

// Upper bound on the payload we agree to allocate (16 GiB); a corrupt header
// claiming more is reported as such instead of failing inside new[].
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;
// The data is read (and its buffer grown) this much at a time, so a header
// claiming more than the file holds costs no more memory than the file.
constexpr int64_t kReadChunk = int64_t{1} << 20;

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

uint32_t big_endian_u32(const std::array<unsigned char, 4>& b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  DecompressedFile in(path);
  std::array<unsigned char, 4> word{};
  in.read_exact(word.data(), 4, "magic number");
  IdxArray out;
  out.magic = big_endian_u32(word);
  const uint32_t ndims = out.magic & 0xff;
  // 0x08 is the unsigned-byte element type, the only one MNIST-style files use.
  if ((out.magic & 0xffffff00u) != 0x00000800u || ndims < 1 || ndims > 4)
    throw InputError(str(path, ": not an unsigned-byte IDX file (magic ", hex32(out.magic),
                         ", expected 0x000008NN with 1 <= NN <= 4)"));
  int64_t total = 1;
  for (uint32_t d = 0; d < ndims; ++d) {
    in.read_exact(word.data(), 4, "header");
    const int64_t dim = big_endian_u32(word);
    out.dims.push_back(dim);
    // Checked before multiplying: 2^34 times a dimension of up to 2^32 would
    // overflow (found by tests/fuzz/idx).
    if (dim != 0 && total > kMaxIdxBytes / dim)
      throw InputError(
          str(path, ": header claims more than ", kMaxIdxBytes, " bytes of data; corrupt file?"));
    total *= dim;
  }
  for (int64_t done = 0; done < total;) {
    const int64_t want = std::min(kReadChunk, total - done);
    out.data.resize(static_cast<std::size_t>(done + want));
    const int64_t got = in.read_up_to(out.data.data() + done, want);
    done += got;
    if (got < want)
      throw InputError(str(path, ": truncated file: the data needs ", total, " bytes but only ",
                           done, " are there (re-download or re-extract it)"));
  }
  in.expect_end(str("the ", 4 * (ndims + 1) + total, " bytes its header describes"));
  out.sha256 = in.sha256();
  return out;
}

IdxImages read_idx_images(const std::string& path) {
  IdxArray a = read_idx(path);
  if (a.magic != kIdxImagesMagic)
    throw InputError(str(path, ": wrong magic ", hex32(a.magic), " for an images file (expected ",
                         hex32(kIdxImagesMagic), ": count, rows, cols)"));
  IdxImages out;
  out.count = a.dims[0];
  out.rows = a.dims[1];
  out.cols = a.dims[2];
  out.pixels = std::move(a.data);
  out.sha256 = std::move(a.sha256);
  return out;
}

IdxLabels read_idx_labels(const std::string& path, int64_t num_classes) {
  IdxArray a = read_idx(path);
  if (a.magic != kIdxLabelsMagic)
    throw InputError(str(path, ": wrong magic ", hex32(a.magic), " for a labels file (expected ",
                         hex32(kIdxLabelsMagic), ")"));
  if (num_classes > 0) {
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      if (a.data[i] >= num_classes)
        throw InputError(str(path, ": label ", int{a.data[i]}, " at index ", i,
                             " is out of range [0, ", num_classes, ")"));
    }
  }
  return {std::move(a.data), std::move(a.sha256)};
}

}  // namespace mddp::data
