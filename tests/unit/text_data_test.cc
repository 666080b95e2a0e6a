// Tests of the text dataset (core/data/text_*.h, char_tokenizer.h, utf8.h):
// strict UTF-8, the character vocabulary, which files a folder gives, every
// bad input's one line, the windows and their split, the sampler on them,
// and the committed sample corpus and Debian's fortunes (when installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/common/check.h"
#include "core/data/char_tokenizer.h"
#include "core/data/factory.h"
#include "core/data/sampler.h"
#include "core/data/text_dataset.h"
#include "core/data/text_files.h"
#include "core/data/utf8.h"
#include "tests/support/errors.h"

namespace fs = std::filesystem;
using namespace mddp;
using namespace mddp::data;
using tensor::Tensor;

namespace {

const std::string kTinyCorpus = std::string(MDDP_TEST_DATA_DIR) + "/tiny_corpus.txt";
const std::string kFortunesDir = "/usr/share/games/fortunes";

using mddp::test::expect_input_error;

void write_bytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
}

// A fresh directory per test, removed afterwards.
class TextFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("text-data-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// A TextDataset's whole batch of the given samples, as float vectors.
std::pair<std::vector<float>, std::vector<float>> windows(const Dataset& d,
                                                          const std::vector<int64_t>& idx) {
  const auto b = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::empty({b, d.sample_shape()[0]});
  Tensor y = Tensor::empty({b, d.targets_per_sample()});
  d.get_batch(idx, x, y);
  return {x.to_vector(), y.to_vector()};
}

std::vector<int64_t> as_ids(const std::vector<float>& v, std::size_t begin, std::size_t n) {
  std::vector<int64_t> ids;
  for (std::size_t k = begin; k < begin + n; ++k) ids.push_back(static_cast<int64_t>(v[k]));
  return ids;
}

}  // namespace

// ---- UTF-8 ------------------------------------------------------------------

TEST(Utf8, RoundTripsOneToFourByteCharacters) {
  const std::u32string text = U"a\u00e9\u20ac\U0001F600z\u007f\u0080\u07ff\u0800\uffff\U0010FFFF";
  const std::string bytes = encode_utf8(text);
  EXPECT_EQ(bytes,
            "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80"
            "\xef\xbf\xbf\xf4\x8f\xbf\xbf");
  EXPECT_EQ(decode_utf8(bytes, "t"), text);
  EXPECT_EQ(char_name(U'a'), "'a' (U+0061)");
  EXPECT_EQ(char_name(U'\n'), "U+000A");
  EXPECT_EQ(char_name(U' '), "U+0020");
}

TEST(Utf8, RefusesWhatRfc3629DoesNotAllowNamingTheOffset) {
  const auto bad = [](const std::string& bytes, const std::string& offset, const std::string& why) {
    expect_input_error([&] { decode_utf8(bytes, "f.txt"); },
                       {"f.txt: not valid UTF-8 at byte offset " + offset, why});
  };
  bad("ab\x80", "2", "continuation byte 0x80 starts a character");
  bad("a\xff", "1", "byte 0xFF never occurs in UTF-8");
  bad("abc\xe2\x82", "3", "ends inside a 3-byte sequence");
  bad("a\xc3(", "1", "byte 0x28 at offset 2 does not continue a 2-byte sequence");
  bad("\xc0\x80", "0", "overlong encoding of U+0000");
  bad("xy\xe0\x80\xaf", "2", "overlong encoding of U+002F");
  bad("\xed\xa0\x80", "0", "surrogate U+D800");
  bad("\xf4\x90\x80\x80", "0", "U+110000 is beyond U+10FFFF");
}

// ---- the tokenizer ----------------------------------------------------------

TEST(CharTokenizer, IdsAreTheSortedCodePoints) {
  const auto tok = CharTokenizer::of_text(U"hello, w\u00f6rld\n", "t");
  EXPECT_EQ(tok.size(), 11);
  EXPECT_EQ(tok.vocabulary(), "\n ,dehlorw\xc3\xb6");  // ö (U+00F6) sorts after ASCII
  EXPECT_EQ(tok.encode(U"hello"), (std::vector<TokenId>{5, 4, 6, 6, 7}));
  const std::vector<int64_t> ids = {5, 4, 6, 6, 7, 2, 1, 9, 10, 10, 0};
  EXPECT_EQ(tok.decode(ids), "hello, w\xc3\xb6\xc3\xb6\n");

  // The vocabulary string alone rebuilds the same tokenizer (what `sample` does).
  const auto back = CharTokenizer::from_vocabulary(tok.vocabulary());
  EXPECT_EQ(back.vocabulary(), tok.vocabulary());
  EXPECT_EQ(back.encode(U"w\u00f6rld"), tok.encode(U"w\u00f6rld"));

  expect_input_error([&] { tok.decode(std::vector<int64_t>{11}); },
                     {"token id 11", "vocabulary of 11 characters"});
  expect_input_error([&] { tok.encode(U"hex"); }, {"'x' (U+0078) at position 2"});
  expect_input_error([] { CharTokenizer::from_vocabulary("ba"); }, {"not a sorted set", "id 1"});
  expect_input_error([] { CharTokenizer::from_vocabulary("aab"); }, {"not a sorted set"});
  expect_input_error([] { CharTokenizer::of_text(U"", "t"); }, {"t: no characters"});
}

TEST(CharTokenizer, RefusesAVocabularyBeyondTheSixteenBitIds) {
  std::u32string text;
  for (char32_t c = 0x100; text.size() < static_cast<std::size_t>(kMaxVocabulary); ++c)
    if (c < 0xD800 || c > 0xDFFF) text.push_back(c);
  EXPECT_EQ(CharTokenizer::of_text(text, "t").size(), kMaxVocabulary);  // 65536 fit
  text.push_back(0x10FFFF);
  expect_input_error([&] { CharTokenizer::of_text(text, "big.txt"); },
                     {"big.txt: a vocabulary of 65537 distinct characters", "at most 65536"});
}

// ---- which files ------------------------------------------------------------

TEST_F(TextFiles, AFolderGivesItsTextFilesInSortedOrderByTheDocumentedRule) {
  write_bytes(dir_ / "b.txt", "bee");
  write_bytes(dir_ / "a" / "z.txt", "zed");
  write_bytes(dir_ / "a.txt", "ay");
  write_bytes(dir_ / "cookie", "fortune");
  write_bytes(dir_ / "cookie.dat", std::string("\0\0\0\2", 4) + "binary index");  // skipped: *.dat
  fs::create_symlink("cookie", dir_ / "cookie.u8");                               // skipped: a link
  write_bytes(dir_ / ".hidden", "no");                                            // skipped: hidden
  write_bytes(dir_ / ".git" / "HEAD", "no");                                      // hidden folder
  write_bytes(dir_ / "empty.txt", "");                                            // skipped: empty
  const fs::path outside = dir_.string() + "-outside";
  write_bytes(outside / "secret.txt", "no");
  fs::create_directory_symlink(outside, dir_ / "elsewhere");  // not followed

  const std::vector<std::string> expected = {path("a/z.txt"), path("a.txt"), path("b.txt"),
                                             path("cookie")};
  EXPECT_EQ(text_files(dir_.string()), expected);
  EXPECT_EQ(read_corpus(dir_.string()), U"zed\nay\nbee\nfortune");
  // A file named directly is read whatever its name, through a link too.
  EXPECT_EQ(text_files(path("cookie.u8")), std::vector<std::string>{path("cookie.u8")});
  EXPECT_EQ(read_corpus(path("cookie.u8")), U"fortune");
  fs::remove_all(outside);
}

TEST_F(TextFiles, BadInputGetsOneLineNamingTheFile) {
  expect_input_error([&] { text_files(path("missing")); },
                     {path("missing"), "no such file or folder"});
  write_bytes(dir_ / "empty.txt", "");
  expect_input_error([&] { text_files(path("empty.txt")); }, {path("empty.txt"), "empty file"});
  fs::create_directories(dir_ / "nothing");
  write_bytes(dir_ / "nothing" / "index.dat", "x");
  expect_input_error([&] { text_files(path("nothing")); },
                     {path("nothing"), "holds no file to read", "*.dat"});

  write_bytes(dir_ / "nul.bin", std::string("text\0more", 9));
  expect_input_error([&] { read_text_file(path("nul.bin")); },
                     {path("nul.bin"), "binary file (a NUL byte at offset 4)"});
  write_bytes(dir_ / "latin1.txt", "caf\xe9 au lait");
  expect_input_error([&] { read_text_file(path("latin1.txt")); },
                     {path("latin1.txt"), "not valid UTF-8 at byte offset 3"});
  write_bytes(dir_ / "controls.bin", "ab\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0e");
  expect_input_error([&] { read_text_file(path("controls.bin")); },
                     {path("controls.bin"), "looks binary: 10 of its 12 characters"});
  // A few backspaces and bells, as fortunes has, are text.
  write_bytes(dir_ / "overstrike.txt", "under_\b_lined, and a bell\a, in a line of text\r\n\f\t");
  EXPECT_NO_THROW(read_text_file(path("overstrike.txt")));

  // In a folder, the first bad file stops the read and is named.
  write_bytes(dir_ / "mixed" / "a.txt", "fine");
  write_bytes(dir_ / "mixed" / "b.txt", "fine\xc3");
  expect_input_error([&] { read_corpus(path("mixed")); },
                     {path("mixed/b.txt"), "byte offset 4", "ends inside a 2-byte sequence"});
}

// ---- the dataset ------------------------------------------------------------

TEST(TextDataset, WindowsPredictTheNextTokenAndTheSplitIsByPosition) {
  std::u32string corpus;
  for (int i = 0; i < 100; ++i) corpus.push_back(U'a' + static_cast<char32_t>(i % 26));
  const int64_t block = 8;
  const TextDataset train(corpus, Split::kTrain, block, "abc");
  const TextDataset valid(corpus, Split::kTest, block, "abc");
  EXPECT_EQ(train.name(), "text:abc/train");
  EXPECT_EQ(train.tokens().size(), 90u);  // the first 90%
  EXPECT_EQ(valid.tokens().size(), 10u);  // the last 10%
  EXPECT_EQ(train.size(), 90 - block);    // every start whose window of block + 1 fits
  EXPECT_EQ(valid.size(), 10 - block);
  EXPECT_EQ(train.sample_shape(), (tensor::Shape{block}));
  EXPECT_EQ(train.targets_per_sample(), block);
  EXPECT_EQ(train.target_dim(), 0);
  EXPECT_EQ(train.num_classes(), 26);
  EXPECT_EQ(valid.vocabulary(), train.vocabulary());  // the whole corpus's
  EXPECT_EQ(train.input_encoding().raw, "token_id");

  const std::vector<int64_t> idx = {0, 81, 37};
  const auto [x, y] = windows(train, idx);
  for (std::size_t b = 0; b < idx.size(); ++b) {
    const auto from = static_cast<std::size_t>(idx[b]);
    EXPECT_EQ(train.tokenizer().decode(as_ids(x, b * block, block)),
              encode_utf8(corpus.substr(from, block)));
    EXPECT_EQ(train.tokenizer().decode(as_ids(y, b * block, block)),
              encode_utf8(corpus.substr(from + 1, block)));
  }
  // The validation windows start at token 90 of the corpus.
  const auto [vx, vy] = windows(valid, {1});
  EXPECT_EQ(valid.tokenizer().decode(as_ids(vx, 0, block)), encode_utf8(corpus.substr(91, block)));
  EXPECT_EQ(valid.tokenizer().decode(as_ids(vy, 0, block)), encode_utf8(corpus.substr(92, block)));
}

TEST(TextDataset, ASplitShorterThanOneWindowSaysWhatItNeeds) {
  const std::u32string corpus(400, U'x');
  expect_input_error([&] { TextDataset(corpus, Split::kTest, 64, "short.txt"); },
                     {"short.txt: the validation split has 40 tokens (the last 10% of 400)",
                      "--block 64 needs 65 in each split", "at least 641 tokens"});
  expect_input_error([&] { TextDataset(std::u32string(3, U'x'), Split::kTrain, 2, "s"); },
                     {"s: the train split has 2 tokens (the first 90% of 3)", "needs 3"});
  EXPECT_NO_THROW(TextDataset(std::u32string(641, U'x'), Split::kTest, 64, "s"));
  expect_input_error([&] { TextDataset(corpus, Split::kTrain, 0, "s"); },
                     {"--block 0 must be at least 1"});
}

// The unchanged GlobalBatchSampler on windows: at every step two ranks draw
// disjoint windows whose union, in rank order, is one process's batch.
TEST(TextDataset, TheSamplerSplitsWindowsOverRanksAsOneProcessWouldDrawThem) {
  DatasetConfig cfg;
  cfg.spec = "text:" + kTinyCorpus;
  cfg.block = 16;
  const auto data = make_dataset(cfg, Split::kTrain);
  const int64_t batch = 32;
  GlobalBatchSampler single(data->size(), batch, 0, 1, 7);
  GlobalBatchSampler rank0(data->size(), batch, 0, 2, 7), rank1(data->size(), batch, 1, 2, 7);
  for (int64_t step = 0; step < single.steps_per_epoch(); step += 13) {
    const auto a = rank0.indices(1, step), b = rank1.indices(1, step);
    std::vector<int64_t> joined(a.begin(), a.end());
    joined.insert(joined.end(), b.begin(), b.end());
    const auto whole = single.indices(1, step);
    ASSERT_EQ(joined, std::vector<int64_t>(whole.begin(), whole.end())) << "step " << step;
    std::set<int64_t> in_a(a.begin(), a.end());
    for (int64_t i : b) EXPECT_FALSE(in_a.count(i)) << "window " << i << " on both ranks";
    // And the tokens: the ranks' x rows are the single process's, in order.
    const auto [xa, ya] = windows(*data, {a.begin(), a.end()});
    const auto [xb, yb] = windows(*data, {b.begin(), b.end()});
    const auto [xs, ys] = windows(*data, joined);
    std::vector<float> xj = xa;
    xj.insert(xj.end(), xb.begin(), xb.end());
    EXPECT_EQ(xj, xs);
  }
  // Deterministic from the seed: a second sampler draws the same windows.
  GlobalBatchSampler again(data->size(), batch, 1, 2, 7);
  const auto first = rank1.indices(0, 3), second = again.indices(0, 3);
  EXPECT_EQ(std::vector<int64_t>(first.begin(), first.end()),
            std::vector<int64_t>(second.begin(), second.end()));
}

// ---- the committed sample and the factory -----------------------------------

TEST(TextDataset, TheSampleCorpusLoadsThroughTheFactory) {
  DatasetConfig cfg;
  cfg.spec = "text:" + kTinyCorpus;
  cfg.block = 32;
  const auto train = make_dataset(cfg, Split::kTrain);
  const auto valid = make_dataset(cfg, Split::kTest);
  const std::u32string text = read_corpus(kTinyCorpus);
  const auto n = static_cast<int64_t>(text.size());
  EXPECT_EQ(n, 2975);  // characters in 2979 bytes: é, ï and an em dash take more than one
  EXPECT_EQ(train->num_classes(), 59);
  EXPECT_EQ(train->size(), train_token_count(n) - 32);
  EXPECT_EQ(valid->size(), n - train_token_count(n) - 32);
  EXPECT_EQ(train->vocabulary(), valid->vocabulary());
  EXPECT_EQ(train->sample_shape(), (tensor::Shape{32}));
  EXPECT_EQ(dataset_source(cfg.spec), kTinyCorpus);
  EXPECT_EQ(train->name(), "text:" + kTinyCorpus + "/train");

  // The first window decodes to the file's first 32 characters.
  const auto [x, y] = windows(*train, {0});
  const auto* t = dynamic_cast<const TextDataset*>(train.get());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->tokenizer().decode(as_ids(x, 0, 32)), encode_utf8(text.substr(0, 32)));

  cfg.spec = "text:";
  expect_input_error([&] { make_dataset(cfg, Split::kTrain); }, {"text:PATH needs a file"});
  cfg.spec = "text:" + kTinyCorpus;
  cfg.block = 300;  // the validation split has 298 tokens
  expect_input_error([&] { make_dataset(cfg, Split::kTest); },
                     {"validation split has 298 tokens", "--block 300 needs 301"});
}

TEST(TextDataset, DebianFortunesIsACorpus) {
  if (!fs::is_directory(kFortunesDir))
    GTEST_SKIP() << kFortunesDir << " not found (apt-get install fortunes)";
  DatasetConfig cfg;
  cfg.spec = "text:" + kFortunesDir;
  cfg.block = 128;
  const auto train = make_dataset(cfg, Split::kTrain);
  const auto valid = make_dataset(cfg, Split::kTest);
  const int64_t n = train->size() + valid->size() + 2 * cfg.block;
  // fortunes 1:1.99.1-7.3 (Debian 12): 43 files, 2,576,669 characters, 113 of them distinct.
  std::cout << "fortunes: " << text_files(kFortunesDir).size() << " files, " << n
            << " characters, a vocabulary of " << train->num_classes() << "\n";
  EXPECT_GT(n, 2'000'000);
  EXPECT_GE(train->num_classes(), 90);
  EXPECT_LE(train->num_classes(), 200);
  for (const std::string& f : text_files(kFortunesDir)) {
    EXPECT_FALSE(f.ends_with(".dat")) << f;
    EXPECT_FALSE(fs::is_symlink(f)) << f;
  }
}
