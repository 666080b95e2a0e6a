#include "core/data/known_files.h"

#include "core/common/check.h"

namespace mddp::data {

const std::vector<KnownFile>& known_files() {
  static const std::vector<KnownFile> files = {
      {"Fashion-MNIST", "train-images-idx3-ubyte",
       "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
      {"Fashion-MNIST", "train-labels-idx1-ubyte",
       "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
      {"Fashion-MNIST", "t10k-images-idx3-ubyte",
       "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
      {"Fashion-MNIST", "t10k-labels-idx1-ubyte",
       "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
      {"MNIST", "train-images-idx3-ubyte",
       "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
      {"MNIST", "train-labels-idx1-ubyte",
       "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
      {"MNIST", "t10k-images-idx3-ubyte",
       "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
      {"MNIST", "t10k-labels-idx1-ubyte",
       "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
  };
  return files;
}

namespace {
const KnownFile* find(std::string_view dataset, std::string_view stem) {
  for (const KnownFile& k : known_files())
    if (k.dataset == dataset && k.stem == stem) return &k;
  return nullptr;
}
}  // namespace

std::string known_dataset_of(const FileSum& f) {
  for (const KnownFile& k : known_files())
    if (k.stem == f.stem && k.sha256 == f.sha256) return std::string(k.dataset);
  return "";
}

std::string check_known_sums(const std::vector<FileSum>& files, const std::string& expected) {
  std::string dataset = expected;
  for (std::size_t i = 0; dataset.empty() && i < files.size(); ++i)
    dataset = known_dataset_of(files[i]);
  if (dataset.empty()) return dataset;
  for (const FileSum& f : files) {
    const KnownFile* k = find(dataset, f.stem);
    if (k != nullptr && k->sha256 != f.sha256)
      throw InputError(str(f.path, ": not the ", dataset,
                           " file it should be: the SHA-256 of its uncompressed bytes is ",
                           f.sha256, ", ", dataset, "'s ", f.stem, " has ", k->sha256,
                           " (the file is damaged or was changed; reinstall or re-download it; "
                           "`microddp data verify DIR` checks all four files)"));
  }
  return dataset;
}

}  // namespace mddp::data
