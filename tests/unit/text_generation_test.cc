// A GPT read back from its checkpoint alone (core/train/text_generation.h):
// the same weights bit for bit and the same text as the model that wrote
// it; the vocabulary from the file; the prompt's ids; and each refusal
// (another model, no vocabulary, a character the model cannot read).
#include "core/train/text_generation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/common/check.h"
#include "core/data/utf8.h"
#include "core/train/loop.h"
#include "core/train/trainer.h"
#include "tests/unit/gradcheck.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;
using test::thrown_message;

TrainConfig tiny_text_job(const std::string& corpus) {
  TrainConfig c;
  c.model = {.kind = "gpt", .layers = 1, .heads = 2, .embd = 8, .block = 5};
  c.data.spec = "text:" + corpus;
  c.data.block = 5;
  c.batch = 4;
  c.steps = 2;
  c.eval = false;
  return c;
}

class TextGeneration : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("text-generation-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_ = (dir_ / "corpus.txt").string();
    std::ofstream out(corpus_);
    for (int i = 0; i < 8; ++i) out << "a cab, a bed; a dace.\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A checkpoint of `cfg` after its steps, and the trainer that wrote it.
  std::string checkpoint_of(Trainer& t, const std::string& name) {
    for (int64_t i = 0; i < t.total_steps(); ++i) t.step();
    const std::string file = (dir_ / name).string();
    t.save_checkpoint(file);
    return file;
  }
  fs::path dir_;
  std::string corpus_;
};

TEST_F(TextGeneration, TheModelReadBackIsTheModelThatWasSaved) {
  Trainer t(tiny_text_job(corpus_));
  const std::string file = checkpoint_of(t, "gpt.safetensors");
  GptCheckpoint c =
      load_gpt_checkpoint(dir_.string() + "/gpt.state.safetensors", "--checkpoint", {});
  EXPECT_EQ(c.path, file);  // either file of the pair names it
  EXPECT_EQ(c.tokenizer.vocabulary(), "\n ,.;abcde");
  const auto saved = t.model().parameters(), read = c.model->parameters();
  ASSERT_EQ(saved.size(), read.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(saved[i]->name, read[i]->name);
    EXPECT_TRUE(test::bitwise_equal(saved[i]->value.to_vector(), read[i]->value.to_vector()))
        << saved[i]->name;
  }
  const nn::SamplingOptions sampled{.temperature = 1.0f};
  auto& trained = dynamic_cast<nn::Gpt&>(t.model());
  EXPECT_EQ(generate_text(*c.model, c.tokenizer, "a b", 20, sampled, 3),
            generate_text(trained, c.tokenizer, "a b", 20, sampled, 3));
  const std::string text = generate_text(*c.model, c.tokenizer, "a b", 20, sampled, 3);
  EXPECT_EQ(text.size(), 23u);  // the prompt, then 20 one-byte characters
  EXPECT_EQ(text.substr(0, 3), "a b");
}

TEST_F(TextGeneration, PromptIdsAndTheEmptyPrompt) {
  const data::CharTokenizer tok = data::CharTokenizer::from_vocabulary("\n ,.;abcde");
  EXPECT_EQ(prompt_ids(tok, "dab", "--prompt"), (std::vector<int64_t>{8, 5, 6}));
  EXPECT_EQ(prompt_ids(tok, "", "--prompt"), (std::vector<int64_t>{0}));  // the newline
  const data::CharTokenizer no_newline = data::CharTokenizer::from_vocabulary("xyz");
  EXPECT_EQ(prompt_ids(no_newline, "", "--prompt"), (std::vector<int64_t>{0}));  // 'x'
}

TEST_F(TextGeneration, APromptCharacterOutsideTheVocabularyIsNamed) {
  const data::CharTokenizer tok = data::CharTokenizer::from_vocabulary("\n ,.;abcde");
  const std::string e = thrown_message<InputError>([&] { prompt_ids(tok, "bad Z", "--prompt"); });
  EXPECT_EQ(e,
            "--prompt: character 'Z' (U+005A) at position 4 is not in the vocabulary; the model "
            "reads 10 characters: \"\\n ,.;abcde\"");
  EXPECT_NE(thrown_message<InputError>([&] {
              prompt_ids(tok, "\xff", "--prompt");
            }).find("--prompt: not valid UTF-8"),
            std::string::npos);
}

TEST_F(TextGeneration, RefusesACheckpointThatIsNotATextGpt) {
  TrainConfig mlp;
  mlp.data.spec = "synthetic";
  mlp.data.synthetic_size = 32;
  mlp.batch = 16;
  mlp.steps = 1;
  mlp.eval = false;
  Trainer m(mlp);
  const std::string mlp_file = checkpoint_of(m, "mlp.safetensors");
  EXPECT_EQ(thrown_message<InputError>([&] { load_gpt_checkpoint(mlp_file, "--checkpoint", {}); }),
            "--checkpoint " + mlp_file +
                ": a checkpoint of a Sequential, not of a GPT; sample reads one trained with "
                "--model gpt");

  TrainConfig tokens = tiny_text_job(corpus_);
  tokens.data.spec = "synthetic-tokens";
  Trainer s(tokens);
  const std::string tokens_file = checkpoint_of(s, "tokens.safetensors");
  EXPECT_EQ(
      thrown_message<InputError>([&] { load_gpt_checkpoint(tokens_file, "--checkpoint", {}); }),
      "--checkpoint " + tokens_file +
          ": no vocabulary in its metadata (a GPT trained on synthetic-tokens); sample reads one "
          "trained on --dataset text:PATH");

  EXPECT_NE(thrown_message<InputError>([&] {
              load_gpt_checkpoint((dir_ / "none").string(), "--checkpoint", {});
            }).find("--checkpoint " + (dir_ / "none").string() + ": no such file or directory"),
            std::string::npos);
}

// run_training's evaluation: rank 0 (hooks.print) writes kEvalSampleTokens
// characters of the vocabulary, the text evaluation_sample gives for the
// trained model and the job's seed; another rank, or a model that is not a
// GPT on text, writes none.
TEST_F(TextGeneration, RankZeroWritesASampleAtEachEvaluation) {
  TrainConfig cfg = tiny_text_job(corpus_);
  cfg.eval = true;
  const auto evaluation_text = [](Trainer& trainer, bool rank_zero) {
    LoopHooks hooks;
    hooks.print = rank_zero;
    return run_training(trainer, hooks).eval.sample;
  };
  Trainer t(cfg);
  const std::string sample = evaluation_text(t, true);
  const std::u32string text = data::decode_utf8(sample, "the sample");
  EXPECT_EQ(static_cast<int64_t>(text.size()), kEvalSampleTokens);
  for (char32_t c : text)
    EXPECT_NE(std::string("\n ,.;abcde").find(static_cast<char>(c)), std::string::npos);
  EXPECT_EQ(sample, evaluation_sample(t.model(), t.train_set(), cfg.seed));

  Trainer other_rank(cfg);
  EXPECT_EQ(evaluation_text(other_rank, false), "");
  TrainConfig mlp;
  mlp.data.spec = "synthetic";
  mlp.data.synthetic_size = 32;
  mlp.batch = 16;
  mlp.steps = 1;
  Trainer m(mlp);
  EXPECT_EQ(evaluation_text(m, true), "");
}

}  // namespace
}  // namespace mddp::train
