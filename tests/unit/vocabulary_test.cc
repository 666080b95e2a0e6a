// The vocabulary travels with a text model: the checkpoint's `dataset`
// document records it, and --init-from or --resume with data whose
// vocabulary differs is refused naming both sizes and the first character
// that differs (the same ids would mean other characters).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/data/factory.h"
#include "core/train/checkpoint_meta.h"
#include "core/train/trainer.h"
#include "tests/support/errors.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;

// 28 characters: '\n', ' ' and a..z; `upper_z` swaps 'z' for 'Z', which keeps
// the size (so the model's shapes) and changes id 2 onwards.
std::string pangrams(bool upper_z) {
  std::string one = upper_z ? "the quick brown fox jumps over the laZy dog\n"
                            : "the quick brown fox jumps over the lazy dog\n";
  std::string text;
  for (int i = 0; i < 6; ++i) text += one;
  return text;
}

TrainConfig text_config(const std::string& file) {
  TrainConfig c;
  c.model = {.kind = "gpt", .layers = 1, .heads = 1, .embd = 8, .block = 4};
  c.data.spec = "text:" + file;
  c.data.block = 4;
  c.batch = 8;
  c.steps = 2;
  c.eval = false;
  c.optim = {.name = "sgd", .lr = 0.05f};
  return c;
}

using mddp::test::input_error_of;

class VocabularyCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vocabulary-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write_text(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  fs::path dir_;
};

TEST_F(VocabularyCheck, TheCheckpointRecordsTheVocabulary) {
  const std::string corpus = write_text("a.txt", pangrams(false));
  Trainer t(text_config(corpus));
  const std::string file = (dir_ / "a.safetensors").string();
  t.save_checkpoint(file);
  const auto meta = nlohmann::json::parse(read_checkpoint(file).model.metadata.at("dataset"));
  EXPECT_EQ(meta.at("vocabulary"), "\n abcdefghijklmnopqrstuvwxyz");
  EXPECT_EQ(meta.at("classes"), 28);
  EXPECT_EQ(meta.at("sample_shape"), (std::vector<int64_t>{4}));
  EXPECT_EQ(meta.at("source"), corpus);
  // Data that is not text records none, as before.
  data::DatasetConfig synthetic;
  synthetic.synthetic_size = 16;
  const auto d = data::make_dataset(synthetic, data::Split::kTrain);
  EXPECT_FALSE(nlohmann::json::parse(dataset_json("synthetic", *d)).contains("vocabulary"));
}

TEST_F(VocabularyCheck, InitFromAndResumeRefuseAnotherVocabulary) {
  const std::string corpus = write_text("a.txt", pangrams(false));
  const std::string other = write_text("b.txt", pangrams(true));
  Trainer t(text_config(corpus));
  const std::string file = (dir_ / "a.safetensors").string();
  t.save_checkpoint(file);
  const std::string differs =
      "its vocabulary (28 characters) is not the data's (28 characters): id 2 is 'a' (U+0061) "
      "there, 'Z' (U+005A) here";

  TrainConfig init = text_config(other);
  init.init_from = file;
  const std::string e = input_error_of([&] { Trainer x(init); });
  EXPECT_NE(e.find("--init-from '" + file + "': " + differs), std::string::npos) << e;
  init.data.spec = "text:" + corpus;  // the same text: taken
  EXPECT_NO_THROW(Trainer x(init));

  // Same flags, but the file now holds other text.
  TrainConfig resume = text_config(corpus);
  resume.resume = file;
  write_text("a.txt", pangrams(true));
  const std::string r = input_error_of([&] { Trainer x(resume); });
  EXPECT_NE(r.find("cannot resume from '" + file + "': " + differs), std::string::npos) << r;

  // A longer vocabulary: the first id past the shorter one's end is named.
  write_text("a.txt", pangrams(false) + "!");
  EXPECT_NE(input_error_of([&] {
              check_vocabulary(read_checkpoint(file).model,
                               *data::make_dataset(text_config(corpus).data, data::Split::kTrain),
                               "w");
            })
                .find("w: its vocabulary (28 characters) is not the data's (29 characters): id 2 "
                      "is 'a' (U+0061) there, '!' (U+0021) here"),
            std::string::npos);
}

TEST_F(VocabularyCheck, TheBlockIsPartOfATextJob) {
  const std::string corpus = write_text("a.txt", pangrams(false));
  Trainer t(text_config(corpus));
  const std::string file = (dir_ / "a.safetensors").string();
  t.save_checkpoint(file);
  TrainConfig longer = text_config(corpus);
  longer.model.block = longer.data.block = 8;
  longer.resume = file;
  const std::string e = input_error_of([&] { Trainer x(longer); });
  EXPECT_NE(e.find("--block 4 there, 8 here"), std::string::npos) << e;
  EXPECT_EQ(config_fingerprint(text_config(corpus), 1).at("--block"), "4");
  EXPECT_FALSE(config_fingerprint(TrainConfig{}, 1).contains("--block"));  // not text: as before
}

}  // namespace
}  // namespace mddp::train
