#include "core/data/factory.h"

#include <algorithm>
#include <filesystem>

#include "core/common/check.h"
#include "core/data/idx_dataset.h"
#include "core/data/seeds.h"
#include "core/data/synthetic.h"
#include "core/data/synthetic_tokens.h"
#include "core/data/text_dataset.h"

namespace mddp::data {
namespace {

// Train and test samples come from distinct streams; the teacher from the bare seed (shared).
uint64_t sample_seed(uint64_t seed, Split split) {
  return derive_seed(seed, split == Split::kTrain ? 1 : 2);
}

int64_t synthetic_count(const DatasetConfig& c, Split split) {
  if (split == Split::kTrain) return c.synthetic_size;
  return c.synthetic_test_size > 0 ? c.synthetic_test_size
                                   : std::max<int64_t>(1, c.synthetic_size / 4);
}

}  // namespace

std::string dataset_choices() {
  return "synthetic, synthetic-regression, synthetic-tokens, fashion-mnist, idx:DIR, text:PATH";
}

std::string dataset_source(const std::string& spec) {
  if (spec == "fashion-mnist") return kFashionMnistDir;
  if (spec.starts_with("idx:")) return spec.substr(4);
  if (spec.starts_with("text:")) return spec.substr(5);
  return "";
}

std::vector<std::string> class_names(const std::string& spec) {
  if (spec != "fashion-mnist") return {};
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

std::unique_ptr<Dataset> make_dataset(const DatasetConfig& c, Split split) {
  if (c.spec == "synthetic") {
    return std::make_unique<SyntheticClassification>(synthetic_count(c, split), c.input_dim,
                                                     c.classes, sample_seed(c.seed, split), c.seed);
  }
  if (c.spec == "synthetic-regression") {
    const int64_t out_dim = c.target_dim > 0 ? c.target_dim : c.input_dim;
    return std::make_unique<SyntheticRegression>(synthetic_count(c, split), c.input_dim, out_dim,
                                                 c.noise, sample_seed(c.seed, split), c.seed);
  }
  if (c.spec == "synthetic-tokens") {
    return std::make_unique<SyntheticTokens>(synthetic_count(c, split), c.block, c.classes,
                                             sample_seed(c.seed, split), c.seed);
  }
  if (c.spec == "fashion-mnist") {
    std::error_code ec;
    if (!std::filesystem::is_directory(kFashionMnistDir, ec))
      throw InputError(
          str("fashion-mnist: ", kFashionMnistDir,
              " not found; install it with `apt-get install dataset-fashion-mnist`, or pass "
              "--dataset idx:DIR for a copy elsewhere"));
    return std::make_unique<IdxDataset>(kFashionMnistDir, split,
                                        "fashion-mnist/" + split_name(split), 10, "Fashion-MNIST");
  }
  if (c.spec.starts_with("idx:")) {
    const std::string dir = c.spec.substr(4);
    if (dir.empty()) throw InputError("--dataset idx:DIR needs a directory after 'idx:'");
    return std::make_unique<IdxDataset>(dir, split);
  }
  if (c.spec.starts_with("text:")) {
    const std::string path = c.spec.substr(5);
    if (path.empty()) throw InputError("--dataset text:PATH needs a file or folder after 'text:'");
    return std::make_unique<TextDataset>(path, split, c.block);
  }
  throw InputError(str("unknown dataset '", c.spec, "'; choose one of: ", dataset_choices()));
}

}  // namespace mddp::data
