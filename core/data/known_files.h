// The IDX datasets microddp knows by their files' SHA-256 sums, so a damaged
// or altered copy is named instead of trained on. The sums are of the
// uncompressed files (what DecompressedFile hashes): a copy gzipped again, or
// unpacked, has the same ones.
//
//   Fashion-MNIST  computed here from Debian's dataset-fashion-mnist; the same
//                  sums are published for the files of the Zalando release
//   MNIST          the sums published for LeCun's files (not checked against
//                  the files on this machine: no MNIST is installed here)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mddp::data {

struct KnownFile {
  std::string_view dataset;  // "Fashion-MNIST", "MNIST"
  std::string_view stem;     // MNIST's file name without .gz, e.g. "train-images-idx3-ubyte"
  std::string_view sha256;   // of the uncompressed file, hex
};
const std::vector<KnownFile>& known_files();

// An IDX file as read: where it is, which of MNIST's four files it is, and its sum.
struct FileSum {
  std::string path;
  std::string stem;
  std::string sha256;
};

// The known dataset whose file `f.stem` has f's sum, or "" when none does.
std::string known_dataset_of(const FileSum& f);

// The known dataset of `files`: `expected` when given, else the one whose
// sum any of them has; "" when none (a dataset microddp does not know).
// Throws InputError naming the first file whose sum is not that dataset's.
std::string check_known_sums(const std::vector<FileSum>& files, const std::string& expected = "");

}  // namespace mddp::data
