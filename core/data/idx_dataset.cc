#include "core/data/idx_dataset.h"

#include <algorithm>
#include <filesystem>

#include "core/common/check.h"
#include "core/data/batch_fill.h"
#include "core/data/idx_reader.h"
#include "core/data/known_files.h"

namespace mddp::data {

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  const fs::path plain = fs::path(dir) / stem;
  const fs::path gz = fs::path(dir) / (stem + ".gz");
  std::error_code ec;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  if (fs::is_regular_file(gz, ec)) return gz.string();
  throw InputError(
      str(dir, ": neither ", stem, " nor ", stem, ".gz found (expected the MNIST file layout)"));
}

IdxDataset::IdxDataset(const std::string& dir, Split split, std::string name, int64_t num_classes,
                       const std::string& known, IdxNormalization norm)
    : name_(name.empty() ? str("idx:", dir, "/", split_name(split)) : std::move(name)),
      norm_(norm) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(str(dir, ": no such directory (expected IDX files in the MNIST layout)"));
  if (!(norm.std > 0.0f))
    throw InputError(str(dir, ": normalisation std must be > 0 (got ", norm.std, ")"));

  const std::string prefix =
      split == Split::kTrain ? "train" : "t10k";  // MNIST's names for the splits
  const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");

  IdxImages images = read_idx_images(images_path);
  IdxLabels labels = read_idx_labels(labels_path, num_classes);
  check_known_sums({{images_path, prefix + "-images-idx3-ubyte", images.sha256},
                    {labels_path, prefix + "-labels-idx1-ubyte", labels.sha256}},
                   known);
  labels_ = std::move(labels.labels);
  if (static_cast<int64_t>(labels_.size()) != images.count)
    throw InputError(str(images_path, " holds ", images.count, " images but ", labels_path,
                         " holds ", labels_.size(),
                         " labels; the two files must come from the same split"));
  if (images.count == 0) throw InputError(str(images_path, ": holds no images"));
  if (images.rows == 0 || images.cols == 0)
    throw InputError(str(images_path, ": images of size ", images.rows, "x", images.cols));

  count_ = images.count;
  rows_ = images.rows;
  cols_ = images.cols;
  pixels_ = std::move(images.pixels);
  num_classes_ = num_classes > 0 ? num_classes
                                 : int64_t{*std::max_element(labels_.begin(), labels_.end())} + 1;
  for (int p = 0; p < 256; ++p) lut_[p] = (static_cast<float>(p) / 255.0f - norm.mean) / norm.std;
}

void IdxDataset::get_batch(std::span<const int64_t> indices, tensor::Tensor& x,
                           tensor::Tensor& y) const {
  const auto batch = static_cast<int64_t>(indices.size());
  const int64_t pixels_per_image = rows_ * cols_;
  for (int64_t i : indices)
    MDDP_CHECK(i >= 0 && i < count_, "sample index ", i, " out of range [0, ", count_, ")");

  detail::fill_host(x, batch * pixels_per_image, "x", [&](std::span<float> out) {
    for (int64_t b = 0; b < batch; ++b) {
      const uint8_t* src = pixels_.data() + indices[b] * pixels_per_image;
      float* dst = out.data() + b * pixels_per_image;
      for (int64_t k = 0; k < pixels_per_image; ++k) dst[k] = lut_[src[k]];
    }
  });
  detail::fill_host(y, batch, "y", [&](std::span<float> out) {
    for (int64_t b = 0; b < batch; ++b) out[b] = static_cast<float>(labels_[indices[b]]);
  });
}

}  // namespace mddp::data
