// Resuming one process: N steps straight and N/2, a checkpoint, a new Trainer
// resumed for N/2 give the same bytes (weights and optimiser state), for the
// MLP and the CNN, SGD with momentum and Adam, with accumulation, in fp32,
// bf16 and fp16 (whose loss scaler skips and grows within the run); and a
// checkpoint of another job, or weights of another shape, are refused with
// the differences named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/common/check.h"
#include "core/data/factory.h"
#include "core/train/checkpoint_meta.h"
#include "core/train/trainer.h"
#include "tests/support/errors.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;

TrainConfig config(const std::string& model, const std::string& optimizer) {
  TrainConfig c;
  c.model.kind = model;
  if (model == "mlp") {
    c.data.spec = "synthetic";
    c.data.synthetic_size = 256;
    c.model.width = 16;
  } else {
    c.data.spec = "fashion-mnist";
    c.model.channels = {2, 4};
    c.model.hidden = 8;
  }
  c.batch = 8;
  c.accumulate = 2;
  c.optim = optimizer == "adam" ? nn::OptimizerConfig{.name = "adam", .lr = 1e-3f}
                                : nn::OptimizerConfig{.name = "sgd", .lr = 0.05f, .momentum = 0.9f};
  c.steps = 6;
  c.eval = false;
  return c;
}

// Every byte of the weights and the optimiser state, by name.
std::vector<std::pair<std::string, std::vector<float>>> everything(Trainer& t) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (auto* p : t.model().parameters()) out.emplace_back(p->name, p->value.to_vector());
  for (auto& [name, v] : t.optimizer().state()) out.emplace_back(name, v.to_vector());
  out.emplace_back("optimizer steps",
                   std::vector<float>{static_cast<float>(t.optimizer().steps())});
  return out;
}

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("resume-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

class Resume
    : public ResumeTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string, std::string>> {};

TEST_P(Resume, HalfThenTheRestIsBitwiseTheWholeRun) {
  const auto& [model, optimizer, precision] = GetParam();
  TrainConfig cfg = config(model, optimizer);
  cfg.precision = precision;
  // fp16: a scale that overflows at first and a window of 2, so the scaler's
  // state changes in both halves and a resume that lost it would differ.
  cfg.loss_scale = {.init = std::ldexp(1.0f, 30), .window = 2};
  if (cfg.data.spec == "fashion-mnist" && !fs::exists(data::kFashionMnistDir))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Trainer straight(cfg);
  for (int64_t i = 0; i < cfg.steps; ++i) straight.step();

  Trainer first_half(cfg);
  for (int64_t i = 0; i < cfg.steps / 2; ++i) first_half.step();
  const std::string file = (dir_ / "half.safetensors").string();
  first_half.save_checkpoint(file);

  TrainConfig again = cfg;
  again.resume = file;
  Trainer resumed(again);
  EXPECT_EQ(resumed.steps_done(), cfg.steps / 2);
  while (resumed.steps_done() < cfg.steps) resumed.step();
  EXPECT_EQ(everything(resumed), everything(straight));
  EXPECT_EQ(resumed.loss_scaler().state_json(), straight.loss_scaler().state_json());
  if (precision == "fp16") {
    EXPECT_GT(straight.loss_scaler().skipped_steps(), 0) << "no overflow: the test proves less";
  }
}

INSTANTIATE_TEST_SUITE_P(ModelsAndOptimisers, Resume,
                         ::testing::Combine(::testing::Values("mlp", "cnn"),
                                            ::testing::Values("sgd", "adam"),
                                            ::testing::Values("fp32", "bf16", "fp16")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                  std::get<2>(info.param);
                         });

using mddp::test::input_error_of;

// The GPT with everything that carries state across steps: AdamW's moments,
// the schedule's position (warm-up, then cosine decay), clipping, dropout's
// per-step masks, accumulation; and fp16's loss scaler.
TrainConfig gpt_config(const std::string& precision) {
  TrainConfig c;
  c.model = {.kind = "gpt",
             .classes = 9,
             .layers = 2,
             .heads = 2,
             .embd = 16,
             .block = 8,
             .dropout = 0.1f};
  c.data = {.spec = "synthetic-tokens", .synthetic_size = 64};
  c.optim = {.name = "adamw", .lr = 3e-3f, .weight_decay = 0.1f, .grad_clip = 0.5f};
  c.warmup_steps = 2;
  c.lr_min = 3e-4f;
  c.batch = 4;
  c.accumulate = 2;
  c.steps = 6;
  c.eval = false;
  c.precision = precision;
  return c;
}

class GptResume : public ResumeTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GptResume, HalfThenTheRestIsBitwiseTheWholeRun) {
  const TrainConfig cfg = gpt_config(GetParam());
  Trainer straight(cfg);
  for (int64_t i = 0; i < cfg.steps; ++i) straight.step();
  Trainer first_half(cfg);
  for (int64_t i = 0; i < cfg.steps / 2; ++i) first_half.step();
  const std::string file = (dir_ / "gpt.safetensors").string();
  first_half.save_checkpoint(file);
  TrainConfig again = cfg;
  again.resume = file;
  Trainer resumed(again);
  while (resumed.steps_done() < cfg.steps) resumed.step();
  EXPECT_EQ(everything(resumed), everything(straight));
  // Not vacuous: dropout and the schedule change the result when changed.
  TrainConfig other = cfg;
  other.seed = 43;
  Trainer differently(other);
  for (int64_t i = 0; i < cfg.steps; ++i) differently.step();
  EXPECT_NE(everything(differently), everything(straight));
}

INSTANTIATE_TEST_SUITE_P(Precisions, GptResume, ::testing::Values("fp32", "bf16", "fp16"));

// A GPT checkpoint records how to rebuild the model (nanoGPT's config, the
// tied head) and refuses a resume with another architecture.
TEST_F(ResumeTest, GptCheckpointDescribesTheModelAndRefusesAnotherShape) {
  const TrainConfig cfg = gpt_config("fp32");
  Trainer t(cfg);
  t.step();
  const std::string file = (dir_ / "gpt.safetensors").string();
  t.save_checkpoint(file);
  const Checkpoint c = read_checkpoint(file);
  const std::string model = c.model.metadata.at("model");
  for (const char* piece : {"\"type\":\"GPT\"", "\"n_layer\":2", "\"n_embd\":16",
                            "\"vocab_size\":9", "\"block_size\":8", "\"lm_head.weight\""})
    EXPECT_NE(model.find(piece), std::string::npos) << piece << " in " << model;
  TrainConfig wider = cfg;
  wider.model.embd = 32;
  wider.resume = file;
  const std::string e = input_error_of([&] { Trainer x(wider); });
  EXPECT_NE(e.find("--embd 16 there, 32 here"), std::string::npos) << e;
}

TEST_F(ResumeTest, AnotherJobIsRefusedWithEveryDifference) {
  const TrainConfig cfg = config("mlp", "sgd");
  Trainer t(cfg);
  t.step();
  const std::string file = (dir_ / "c.safetensors").string();
  t.save_checkpoint(file);
  TrainConfig other = cfg;
  other.optim.lr = 0.01f;
  other.batch = 16;
  other.resume = file;
  const std::string e = input_error_of([&] { Trainer x(other); });
  EXPECT_NE(e.find("different job"), std::string::npos) << e;
  EXPECT_NE(e.find("--lr 0.05 there, 0.01 here"), std::string::npos) << e;
  EXPECT_NE(e.find("--batch 8 there, 16 here"), std::string::npos) << e;
  // Another world size: the sums, and so the bits, would differ.
  const std::string w = input_error_of([&] { check_resumable(read_checkpoint(file), cfg, 2); });
  EXPECT_NE(w.find("--nproc 1 there, 2 here"), std::string::npos) << w;
  // Nothing left to do.
  TrainConfig done = cfg;
  done.steps = 1;
  done.resume = file;
  EXPECT_NE(input_error_of([&] { Trainer x(done); }).find("nothing is left to do"),
            std::string::npos);
}

// --init-from takes weights alone, from a checkpoint or any safetensors file
// with the model's names and shapes; the first mismatch is named.
TEST_F(ResumeTest, InitFromTakesTheWeightsAndNamesAMismatch) {
  const TrainConfig cfg = config("mlp", "adam");
  Trainer t(cfg);
  for (int i = 0; i < 3; ++i) t.step();
  const std::string file = (dir_ / "w.safetensors").string();
  t.save_checkpoint(file);

  TrainConfig seeded = cfg;
  seeded.init_from = file;
  seeded.optim = {.name = "sgd", .lr = 0.1f};  // weights only: any optimiser
  Trainer s(seeded);
  EXPECT_EQ(s.steps_done(), 0);
  for (std::size_t i = 0; i < s.model().parameters().size(); ++i)
    EXPECT_EQ(s.model().parameters()[i]->value.to_vector(),
              t.model().parameters()[i]->value.to_vector());

  TrainConfig wider = seeded;
  wider.model.width = 24;
  const std::string e = input_error_of([&] { Trainer x(wider); });
  EXPECT_NE(e.find("--init-from '" + file +
                   "': tensor '1.weight' has shape [16, 16], the model expects [24, 24]"),
            std::string::npos)
      << e;
  TrainConfig deeper = seeded;
  deeper.model.depth = 3;
  EXPECT_NE(input_error_of([&] {
              Trainer x(deeper);
            }).find("tensor '5.weight' has shape [10, 16], the model expects [16, 16]"),
            std::string::npos);
}

}  // namespace
}  // namespace mddp::train
