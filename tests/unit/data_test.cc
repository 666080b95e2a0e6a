// Tests of core/data: the IDX reader on files written here, the datasets, and
// the global-batch sampler's DDP invariant (union of rank shards == the single
// process batch).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/common/check.h"
#include "core/data/factory.h"
#include "core/data/idx_dataset.h"
#include "core/data/idx_reader.h"
#include "core/data/known_files.h"
#include "core/data/sampler.h"
#include "core/data/synthetic.h"
#include "tests/support/errors.h"

namespace fs = std::filesystem;
using namespace mddp;
using namespace mddp::data;
using tensor::Tensor;

namespace {

using mddp::test::expect_input_error;

std::vector<uint8_t> be32(uint32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
}

// IDX bytes: magic, dims, then `payload` (which may be shorter than the dims say).
std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out = be32(magic);
  for (uint32_t d : dims) {
    const auto b = be32(d);
    out.insert(out.end(), b.begin(), b.end());
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

// 3 images of 2x4 pixels with distinct values, and their labels.
const std::vector<uint8_t> kPixels = [] {
  std::vector<uint8_t> p(3 * 2 * 4);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + 5) % 256);
  return p;
}();
const std::vector<uint8_t> kLabels = {2, 0, 9};

class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mddp_data_test_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

// ---- IDX reader -------------------------------------------------------------

TEST_F(DataFiles, ReadsPlainAndGzipWithExactValues) {
  for (bool gz : {false, true}) {
    const std::string images = path(gz ? "images.gz" : "images");
    const std::string labels = path(gz ? "labels.gz" : "labels");
    write_file(images, idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels), gz);
    write_file(labels, idx_bytes(kIdxLabelsMagic, {3}, kLabels), gz);
    const IdxImages im = read_idx_images(images);
    EXPECT_EQ(im.count, 3);
    EXPECT_EQ(im.rows, 2);
    EXPECT_EQ(im.cols, 4);
    EXPECT_EQ(im.pixels, kPixels);
    EXPECT_EQ(read_idx_labels(labels, 10).labels, kLabels);
    const IdxArray raw = read_idx(labels);
    EXPECT_EQ(raw.magic, kIdxLabelsMagic);
    EXPECT_EQ(raw.dims, std::vector<int64_t>{3});
  }
}

TEST_F(DataFiles, BadFilesNameTheFile) {
  // Truncated: the header promises 3x2x4 bytes, the file has fewer.
  for (bool gz : {false, true}) {
    const std::string p = path(gz ? "short.gz" : "short");
    write_file(p,
               idx_bytes(kIdxImagesMagic, {3, 2, 4},
                         std::vector<uint8_t>(kPixels.begin(), kPixels.begin() + 10)),
               gz);
    expect_input_error([&] { read_idx_images(p); }, {p, "truncated"});
  }
  const std::string header_only = path("header_only");
  write_file(header_only, {0, 0, 8}, false);
  expect_input_error([&] { read_idx(header_only); }, {header_only, "truncated"});
  // A header claiming 4 GiB with a few bytes behind it (found by tests/fuzz/idx):
  // refused as truncated without first allocating what it claims.
  const std::string huge = path("huge");
  write_file(huge, {0, 0, 8, 1, 0xff, 0xff, 0xff, 0xff, 1, 2, 3}, false);
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  expect_input_error([&] { read_idx(huge); },
                     {huge, "truncated", "needs 4294967295 bytes but only 3"});
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 512 * 1024)
      << "KiB of peak memory for a 11-byte file";

  // Wrong magic: a labels file read as images, and a file that is not IDX at all.
  const std::string labels = path("labels");
  write_file(labels, idx_bytes(kIdxLabelsMagic, {3}, kLabels), false);
  expect_input_error([&] { read_idx_images(labels); }, {labels, "magic", "0x00000801"});
  const std::string text = path("text");
  write_file(text, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, false);
  expect_input_error([&] { read_idx(text); }, {text, "magic"});

  // Missing file, and a label outside the class range.
  const std::string missing = path("nope-idx1-ubyte");
  expect_input_error([&] { read_idx_labels(missing); }, {missing, "no such file"});
  expect_input_error([&] { read_idx_labels(labels, 5); }, {labels, "label 9", "index 2", "[0, 5)"});
}

// Raw bytes appended to a file.
void append_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<uint8_t> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(DataFiles, GzipIsReadToItsEndAndChecked) {
  const std::vector<uint8_t> labels = idx_bytes(kIdxLabelsMagic, {3}, kLabels);
  // Two gzip members (what `cat a.gz b.gz` makes): one file, read whole.
  const std::string two = path("two.gz");
  write_file(two, std::vector<uint8_t>(labels.begin(), labels.begin() + 6), true);
  write_file(path("tail.gz"), std::vector<uint8_t>(labels.begin() + 6, labels.end()), true);
  append_bytes(two, file_bytes(path("tail.gz")));
  EXPECT_EQ(read_idx_labels(two).labels, kLabels);

  // More data than the header describes, plain or compressed.
  std::vector<uint8_t> longer = labels;
  longer.push_back(7);
  for (bool gz : {false, true}) {
    const std::string p = path(gz ? "long.gz" : "long");
    write_file(p, longer, gz);
    expect_input_error([&] { read_idx_labels(p); },
                       {p, "corrupt", "1 more byte", "the 11 bytes its header describes"});
  }
  // Bytes after the gzip data that are not another member.
  const std::string garbage = path("garbage.gz");
  write_file(garbage, labels, true);
  append_bytes(garbage, {'j', 'u', 'n', 'k'});
  expect_input_error([&] { read_idx_labels(garbage); },
                     {garbage, "corrupt", "not another gzip member"});

  // A damaged CRC-32 in the trailer: the data inflates, the check fails.
  const std::string crc = path("crc.gz");
  write_file(crc, labels, true);
  std::vector<uint8_t> bytes = file_bytes(crc);
  bytes[bytes.size() - 8] ^= 0xff;  // the trailer is CRC-32 then length, 4 bytes each
  write_file(crc, bytes, false);
  expect_input_error([&] { read_idx_labels(crc); }, {crc, "corrupt", "incorrect data check"});
  // A file cut inside the gzip member.
  const std::string cut = path("cut.gz");
  write_file(cut, labels, true);
  bytes = file_bytes(cut);
  ASSERT_GT(bytes.size(), 4u);
  bytes.erase(bytes.end() - 4,
              bytes.end());  // (resize(size() - 4) trips GCC 12's -Wstringop-overflow under ASan)
  write_file(cut, bytes, false);
  expect_input_error([&] { read_idx_labels(cut); }, {cut, "corrupt", "middle of a member"});
}

// The sum covers the uncompressed bytes, so plain and gzip copies agree;
// against sha256sum of the same bytes (an independent implementation).
TEST_F(DataFiles, Sha256IsOfTheUncompressedFile) {
  const std::vector<uint8_t> labels = idx_bytes(kIdxLabelsMagic, {3}, kLabels);
  write_file(path("l"), labels, false);
  write_file(path("l.gz"), labels, true);
  const std::string want = "a17906d734a55ed6080e2c7e9d9bc740b29491d201019c7bcf23acf1d9eb244a";
  EXPECT_EQ(read_idx_labels(path("l")).sha256, read_idx_labels(path("l.gz")).sha256);
  EXPECT_EQ(read_idx_labels(path("l")).sha256, want)
      << "sha256sum of the 11 bytes 00 00 08 01 00 00 00 03 02 00 09";
}

TEST(KnownFiles, NamesTheFileThatDoesNotMatch) {
  const std::string fashion_labels =
      "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9";
  const FileSum labels{"/d/train-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte", fashion_labels};
  const FileSum images{"/d/train-images-idx3-ubyte.gz", "train-images-idx3-ubyte",
                       std::string(64, 'a')};
  EXPECT_EQ(known_dataset_of(labels), "Fashion-MNIST");
  EXPECT_EQ(known_dataset_of(images), "");
  // One file of Fashion-MNIST makes the directory Fashion-MNIST: the other must match too.
  expect_input_error(
      [&] {
        check_known_sums({labels, images});
      },
      {"/d/train-images-idx3-ubyte.gz", "Fashion-MNIST", "c59f468a2f67", std::string(64, 'a')});
  // Asked for by name (--dataset fashion-mnist): even a lone unknown file must match.
  expect_input_error([&] { check_known_sums({images}, "Fashion-MNIST"); },
                     {"/d/train-images-idx3-ubyte.gz"});
  // Files of no known dataset pass (a dataset of one's own).
  EXPECT_EQ(check_known_sums({images}), "");
  EXPECT_EQ(check_known_sums({labels}), "Fashion-MNIST");
}

// ---- IdxDataset -------------------------------------------------------------

TEST_F(DataFiles, IdxDatasetNormalisesAndBatches) {
  write_file(path("train-images-idx3-ubyte"), idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels),
             false);
  write_file(path("train-labels-idx1-ubyte.gz"), idx_bytes(kIdxLabelsMagic, {3}, kLabels), true);
  const IdxDataset ds(dir_.string(), Split::kTrain);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.sample_shape(), (tensor::Shape{1, 2, 4}));
  EXPECT_EQ(ds.num_classes(), 10);  // inferred: max label 9 + 1
  EXPECT_EQ(ds.target_dim(), 0);

  Tensor x = Tensor::empty({2, 1, 2, 4});
  Tensor y = Tensor::empty({2});
  const std::vector<int64_t> idx = {2, 0};
  ds.get_batch(idx, x, y);
  const auto xv = x.to_vector();
  for (int b = 0; b < 2; ++b) {
    for (int k = 0; k < 8; ++k) {
      const float want = (kPixels[idx[b] * 8 + k] / 255.0f - 0.2860f) / 0.3530f;
      EXPECT_NEAR(xv[b * 8 + k], want, 1e-6f) << "b=" << b << " k=" << k;
    }
  }
  EXPECT_EQ(y.to_vector(), (std::vector<float>{9.0f, 2.0f}));

  // The test split is missing: the error names the directory and the file.
  expect_input_error([&] { IdxDataset(dir_.string(), Split::kTest); },
                     {dir_.string(), "t10k-images-idx3-ubyte"});
}

TEST_F(DataFiles, IdxDatasetRejectsCountMismatch) {
  write_file(path("t10k-images-idx3-ubyte"), idx_bytes(kIdxImagesMagic, {3, 2, 4}, kPixels), false);
  write_file(path("t10k-labels-idx1-ubyte"), idx_bytes(kIdxLabelsMagic, {2}, {1, 1}), false);
  expect_input_error(
      [&] { IdxDataset(dir_.string(), Split::kTest); },
      {path("t10k-images-idx3-ubyte"), path("t10k-labels-idx1-ubyte"), "3 images", "2 labels"});
}

TEST(FashionMnist, LoadsBothSplits) {
  if (!fs::is_directory(kFashionMnistDir))
    GTEST_SKIP() << kFashionMnistDir << " not found (apt-get install dataset-fashion-mnist)";
  DatasetConfig cfg;
  cfg.spec = "fashion-mnist";
  const auto train = make_dataset(cfg, Split::kTrain);
  const auto test = make_dataset(cfg, Split::kTest);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->sample_shape(), (tensor::Shape{1, 28, 28}));
  EXPECT_EQ(test->sample_shape(), (tensor::Shape{1, 28, 28}));
  EXPECT_EQ(train->num_classes(), 10);

  // The documented normalisation: the whole training set is near mean 0, std 1.
  std::vector<int64_t> all(60000);
  for (int64_t i = 0; i < 60000; ++i) all[i] = i;
  Tensor x = Tensor::empty({60000, 1, 28, 28});
  Tensor y = Tensor::empty({60000});
  train->get_batch(all, x, y);
  double sum = 0, sq = 0;
  const float* p = x.data();
  for (int64_t i = 0; i < x.numel(); ++i) {
    sum += p[i];
    sq += double{p[i]} * p[i];
  }
  const double mean = sum / x.numel();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / x.numel() - mean * mean), 1.0, 0.01);
  std::vector<int> per_class(10, 0);
  for (float v : y.to_vector()) per_class.at(static_cast<int>(v))++;
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 6000) << "class " << c;
}

// ---- sampler ----------------------------------------------------------------

TEST(EvenShare, ContiguousRunsThatDifferByAtMostOne) {
  for (int64_t total : {0, 1, 5, 12, 13, 96}) {
    for (int64_t parts : {1, 2, 3, 5, 7, 16}) {
      int64_t next = 0, smallest = total, largest = 0;
      for (int64_t p = 0; p < parts; ++p) {
        const Share s = even_share(total, parts, p);
        ASSERT_EQ(s.begin, next) << total << " over " << parts << ", part " << p;
        next = s.end;
        smallest = std::min(smallest, s.size());
        largest = std::max(largest, s.size());
      }
      EXPECT_EQ(next, total) << total << " over " << parts;
      EXPECT_LE(largest - smallest, 1) << total << " over " << parts;
    }
  }
  EXPECT_EQ(even_share(10, 4, 1).size(), 3);  // 3, 3, 2, 2: the first ranks take one more
  EXPECT_EQ(even_share(10, 4, 2).size(), 2);
  EXPECT_EQ(even_share(2, 4, 3).size(), 0);
}

TEST(Sampler, RankShardsUnionIsTheSingleProcessBatch) {
  const int64_t n = 1003, batch = 96;
  for (int world : {1, 2, 3, 4, 5, 7, 8}) {  // 5 and 7 do not divide 96
    GlobalBatchSampler single(n, batch, 0, 1, 42);
    std::vector<GlobalBatchSampler> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(n, batch, r, world, 42);
    for (int64_t epoch : {0, 1}) {
      for (int64_t step = 0; step < single.steps_per_epoch(); ++step) {
        std::vector<int64_t> joined;
        for (auto& s : ranks) {
          const auto part = s.indices(epoch, step);
          ASSERT_EQ(static_cast<int64_t>(part.size()), even_share(batch, world, s.rank()).size());
          ASSERT_LE(static_cast<int64_t>(part.size()), s.max_local_batch());
          joined.insert(joined.end(), part.begin(), part.end());
        }
        const auto whole = single.indices(epoch, step);
        ASSERT_EQ(joined, std::vector<int64_t>(whole.begin(), whole.end()))
            << "world " << world << " step " << step;
        EXPECT_EQ(std::set<int64_t>(joined.begin(), joined.end()).size(), joined.size())
            << "shards overlap";
      }
    }
  }
}

TEST(Sampler, EpochCoversDistinctIndicesAndDropsTheRemainder) {
  const int64_t n = 1003, batch = 100;
  GlobalBatchSampler s(n, batch, 1, 4, 7);
  EXPECT_EQ(s.steps_per_epoch(), 10);
  EXPECT_EQ(s.samples_per_epoch(), n - n % batch);
  std::set<int64_t> seen;
  for (int r = 0; r < 4; ++r) {
    GlobalBatchSampler rank(n, batch, r, 4, 7);
    for (int64_t step = 0; step < rank.steps_per_epoch(); ++step)
      for (int64_t i : rank.indices(0, step)) {
        EXPECT_TRUE(i >= 0 && i < n);
        seen.insert(i);
      }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n - n % batch);
}

// --last-batch keep: one shorter step at the end of each epoch, shared out
// like the others, so every sample is seen once; with fewer samples left than
// ranks, the last ranks' slices are empty, and their stand-in is a sample of
// that step.
TEST(Sampler, KeptLastStepSeesEverySampleOnce) {
  const int64_t n = 1003, batch = 100;
  for (int world : {1, 2, 3, 4, 6}) {
    std::multiset<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      GlobalBatchSampler s(n, batch, r, world, 7, /*shuffle=*/true, /*keep_last=*/true);
      ASSERT_EQ(s.steps_per_epoch(), 11);
      ASSERT_EQ(s.samples_per_epoch(), n);
      ASSERT_EQ(s.batch_at(9), batch);
      ASSERT_EQ(s.batch_at(10), 3);
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
        for (int64_t i : s.indices(1, step)) seen.insert(i);
      const auto last = s.indices(1, 10);
      EXPECT_EQ(static_cast<int64_t>(last.size()), r < 3 ? even_share(3, world, r).size() : 0)
          << "world " << world << " rank " << r;
      const auto perm = s.permutation(1);
      ASSERT_EQ(s.stand_in(1, 10).size(), 1u);
      EXPECT_EQ(s.stand_in(1, 10)[0], perm[10 * batch]);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << "world " << world;
    EXPECT_EQ(static_cast<int64_t>(std::set<int64_t>(seen.begin(), seen.end()).size()), n)
        << "world " << world << ": a sample seen twice";
  }
  GlobalBatchSampler whole(1000, 100, 0, 3, 7, true, /*keep_last=*/true);
  EXPECT_EQ(whole.steps_per_epoch(), 10);  // nothing left over: no shorter step
}

TEST(Sampler, EpochsShuffleDifferentlyAndReproducibly) {
  GlobalBatchSampler a(500, 50, 0, 1, 3), b(500, 50, 0, 1, 3), other_seed(500, 50, 0, 1, 4);
  const auto e0 = std::vector<int64_t>(a.permutation(0).begin(), a.permutation(0).end());
  const auto e1 = std::vector<int64_t>(a.permutation(1).begin(), a.permutation(1).end());
  EXPECT_NE(e0, e1);
  const auto again = b.permutation(0);
  EXPECT_EQ(e0, std::vector<int64_t>(again.begin(), again.end()));
  const auto o = other_seed.permutation(0);
  EXPECT_NE(e0, std::vector<int64_t>(o.begin(), o.end()));
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(sorted[i], i);  // a permutation

  GlobalBatchSampler plain(500, 50, 1, 2, 3, /*shuffle=*/false);
  const auto first = plain.indices(5, 2);
  for (int64_t k = 0; k < 25; ++k) EXPECT_EQ(first[k], 2 * 50 + 25 + k);
}

TEST(Sampler, RejectsBadBatches) {
  expect_input_error([] { GlobalBatchSampler(100, 128, 0, 1, 0); },
                     {"--batch 128", "larger than the dataset"});
  expect_input_error([] { GlobalBatchSampler(100, 0, 0, 1, 0); }, {"--batch 0"});
}

// ---- synthetic data ---------------------------------------------------------

namespace {
std::pair<std::vector<float>, std::vector<float>> whole(const Dataset& ds) {
  std::vector<int64_t> idx(ds.size());
  for (int64_t i = 0; i < ds.size(); ++i) idx[i] = i;
  tensor::Shape xs = ds.sample_shape();
  xs.insert(xs.begin(), ds.size());
  Tensor x = Tensor::empty(xs);
  Tensor y = ds.target_dim() > 0 ? Tensor::empty({ds.size(), ds.target_dim()})
                                 : Tensor::empty({ds.size()});
  ds.get_batch(idx, x, y);
  return {x.to_vector(), y.to_vector()};
}
}  // namespace

TEST(Synthetic, DeterministicFromTheSeed) {
  EXPECT_EQ(whole(SyntheticRegression(64, 16, 4, 0.1f, 5)),
            whole(SyntheticRegression(64, 16, 4, 0.1f, 5)));
  EXPECT_NE(whole(SyntheticRegression(64, 16, 4, 0.1f, 5)).first,
            whole(SyntheticRegression(64, 16, 4, 0.1f, 6)).first);
  EXPECT_EQ(whole(SyntheticClassification(64, 16, 5, 5)),
            whole(SyntheticClassification(64, 16, 5, 5)));
  EXPECT_NE(whole(SyntheticClassification(64, 16, 5, 5)).first,
            whole(SyntheticClassification(64, 16, 5, 6)).first);
}

TEST(Synthetic, RegressionFollowsTheTeacher) {
  const int64_t n = 2000, in = 32, out = 3;
  const float noise = 0.25f;
  const SyntheticRegression ds(n, in, out, noise, 11);
  const auto [x, y] = whole(ds);
  const auto& w = ds.teacher();
  double resid_sq = 0, clean_sq = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < out; ++c) {
      double clean = 0;
      for (int64_t k = 0; k < in; ++k) clean += double{x[i * in + k]} * w[k * out + c];
      resid_sq += (y[i * out + c] - clean) * (y[i * out + c] - clean);
      clean_sq += clean * clean;
    }
  EXPECT_NEAR(std::sqrt(resid_sq / (n * out)), noise, 0.02);  // the residual is the noise
  EXPECT_NEAR(std::sqrt(clean_sq / (n * out)), 1.0, 0.15);    // W* ~ N(0, 1/in) keeps unit scale
}

TEST(Synthetic, ClassificationLabelsInRangeAndAllUsed) {
  const SyntheticClassification ds(4000, 20, 7, 3);
  EXPECT_EQ(ds.num_classes(), 7);
  std::vector<int> count(7, 0);
  for (float v : whole(ds).second) {
    ASSERT_EQ(v, std::floor(v));
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 7.0f);
    count[static_cast<int>(v)]++;
  }
  for (int c = 0; c < 7; ++c) EXPECT_GT(count[c], 100) << "class " << c;
}

// ---- factory ----------------------------------------------------------------

TEST(Factory, SyntheticSplitsShareTheTeacher) {
  DatasetConfig cfg;
  cfg.seed = 9;
  cfg.spec = "synthetic-regression";
  const auto train = make_dataset(cfg, Split::kTrain);
  const auto test = make_dataset(cfg, Split::kTest);
  EXPECT_EQ(train->size(), 8192);
  EXPECT_EQ(test->size(), 2048);
  EXPECT_EQ(train->target_dim(), 128);
  const auto& tr = dynamic_cast<const SyntheticRegression&>(*train);
  const auto& te = dynamic_cast<const SyntheticRegression&>(*test);
  EXPECT_EQ(tr.teacher(), te.teacher());
  const auto tr_x = whole(tr).first;
  const auto te_x = whole(te).first;
  EXPECT_FALSE(std::equal(te_x.begin(), te_x.end(), tr_x.begin()))
      << "train and test drew the same samples";

  cfg.spec = "synthetic";
  cfg.synthetic_size = 1000;
  const auto ctrain = make_dataset(cfg, Split::kTrain);
  const auto ctest = make_dataset(cfg, Split::kTest);
  EXPECT_EQ(ctest->size(), 250);
  EXPECT_EQ(ctrain->num_classes(), 10);
  EXPECT_EQ(dynamic_cast<const SyntheticClassification&>(*ctrain).teacher(),
            dynamic_cast<const SyntheticClassification&>(*ctest).teacher());
}

TEST(Factory, UnknownSpecListsTheChoices) {
  DatasetConfig cfg;
  cfg.spec = "cifar";
  expect_input_error([&] { make_dataset(cfg, Split::kTrain); },
                     {"cifar", "synthetic", "synthetic-regression", "fashion-mnist", "idx:DIR"});
  cfg.spec = "idx:/definitely/not/here";
  expect_input_error([&] { make_dataset(cfg, Split::kTrain); }, {"/definitely/not/here"});
}

TEST(Batches, DeviceTensorsGetTheSameValuesAsHostOnes) {
  if (tensor::cuda_device_count() == 0)
    GTEST_SKIP() << "no CUDA device: the staged copy path is not exercised";
  const SyntheticClassification ds(64, 8, 3, 1);
  const std::vector<int64_t> idx = {5, 63, 0, 17};
  Tensor hx = Tensor::empty({4, 8}), hy = Tensor::empty({4});
  const tensor::Device gpu{tensor::DeviceType::kCuda, 0};
  Tensor dx = Tensor::empty({4, 8}, gpu), dy = Tensor::empty({4}, gpu);
  ds.get_batch(idx, hx, hy);
  ds.get_batch(idx, dx, dy);
  EXPECT_EQ(hx.to_vector(), dx.to_vector());
  EXPECT_EQ(hy.to_vector(), dy.to_vector());
}
