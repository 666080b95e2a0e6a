// Reader for the IDX format of MNIST and Fashion-MNIST (LeCun's format):
//
//   magic   4 bytes, big-endian: 0x00 0x00 <type> <ndims>; type 0x08 = unsigned byte
//   dims    ndims x 4 bytes, big-endian sizes
//   data    prod(dims) bytes, row-major
//
// Labels files have magic 0x00000801 (one dimension: count), images files
// 0x00000803 (count, rows, cols). Files may be plain or gzip-compressed
// (DecompressedFile: every gzip member's CRC-32 and length checked), so `foo`
// and `foo.gz` go through one path. Every problem with a file throws
// mddp::InputError naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mddp::data {

inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;

// Any unsigned-byte IDX array (1 to 4 dimensions).
struct IdxArray {
  uint32_t magic = 0;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // prod(dims) bytes, row-major
  std::string sha256;         // of the whole uncompressed file (header and data), hex
};

struct IdxImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // [count, rows, cols], 0..255
  std::string sha256;           // of the uncompressed file
};

struct IdxLabels {
  std::vector<uint8_t> labels;
  std::string sha256;  // of the uncompressed file
};

// Reads a whole unsigned-byte IDX file. Throws InputError when the file is
// missing or unreadable, is not IDX (wrong magic), is shorter or longer than
// its header says, or its gzip data is corrupt.
IdxArray read_idx(const std::string& path);

// Reads an images file (magic 0x00000803).
IdxImages read_idx_images(const std::string& path);

// Reads a labels file (magic 0x00000801). With num_classes > 0 every label
// must lie in [0, num_classes), else InputError naming the first bad one.
IdxLabels read_idx_labels(const std::string& path, int64_t num_classes = 0);

}  // namespace mddp::data
