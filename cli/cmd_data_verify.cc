// `microddp data verify DIR`: the checks training runs on an IDX directory
// (core/data: every gzip member's CRC-32 and length, no bytes beyond what
// the header describes, the known SHA-256 sums of Fashion-MNIST and MNIST),
// on all four files at once and on demand, one line per file.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/common/check.h"
#include "core/data/factory.h"
#include "core/data/idx_dataset.h"
#include "core/data/idx_reader.h"
#include "core/data/known_files.h"

namespace mddp::cli {
namespace {

struct Checked {
  std::string stem, path, problem;   // path "" when missing; problem "" when fine
  std::optional<data::FileSum> sum;  // when the file could be read
  std::string shape;                 // e.g. "60000x28x28"
};

Checked check_file(const std::string& dir, const std::string& stem) {
  Checked c;
  c.stem = stem;
  try {
    c.path = data::find_idx_file(dir, stem);
    std::string sha256;
    if (stem.find("-images-") != std::string::npos) {
      const data::IdxImages im = data::read_idx_images(c.path);
      c.shape = str(im.count, "x", im.rows, "x", im.cols);
      sha256 = im.sha256;
    } else {
      const data::IdxLabels l = data::read_idx_labels(c.path);
      c.shape = str(l.labels.size());
      sha256 = l.sha256;
    }
    c.sum = data::FileSum{c.path, stem, sha256};
  } catch (const InputError& e) {
    c.problem = e.what();
  }
  return c;
}

void verify(const std::string& dir) {
  std::vector<Checked> files;
  for (const char* split : {"train", "t10k"})
    for (const char* kind : {"images-idx3-ubyte", "labels-idx1-ubyte"})
      files.push_back(check_file(dir, str(split, "-", kind)));
  std::string dataset;
  for (const Checked& c : files)
    if (dataset.empty() && c.sum) dataset = data::known_dataset_of(*c.sum);
  int bad = 0;
  std::string names;
  for (Checked& c : files) {
    if (c.problem.empty() && c.sum) {
      try {
        data::check_known_sums({*c.sum}, dataset);
      } catch (const InputError& e) {
        c.problem = e.what();
      }
    }
    if (c.problem.empty()) {
      std::printf("ok       %-26s %-12s sha256 %s\n", c.stem.c_str(), c.shape.c_str(),
                  c.sum->sha256.c_str());
    } else {
      std::printf("BAD      %-26s %s\n", c.stem.c_str(), c.problem.c_str());
      names += str(bad++ ? ", " : "", c.path.empty() ? c.stem : c.path);
    }
  }
  if (bad > 0) throw InputError(str(dir, ": ", bad, " of 4 files failed the checks: ", names));
  if (dataset.empty())
    std::printf(
        "%s: 4 intact IDX files; not a dataset microddp knows, so no SHA-256 sums to compare\n",
        dir.c_str());
  else
    std::printf("%s: %s, all 4 files intact and matching its known SHA-256 sums\n", dir.c_str(),
                dataset.c_str());
}

}  // namespace

void register_data_verify(CLI::App& data) {
  auto dir = std::make_shared<std::string>(data::kFashionMnistDir);
  auto* cmd = data.add_subcommand(
      "verify",
      "Check an IDX directory as training would: gzip CRCs and lengths, sizes against the headers, "
      "and the known SHA-256 sums of Fashion-MNIST and MNIST");
  cmd->add_option("dir", *dir, "the directory (the MNIST file layout)")->capture_default_str();
  cmd->callback([dir] { verify(*dir); });
}

}  // namespace mddp::cli
