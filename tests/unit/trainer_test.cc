// The single-process training loop: reproducible from the seed, learns
// Fashion-MNIST, and refuses impossible configurations with a clear error.
#include "core/train/trainer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/common/check.h"
#include "core/data/factory.h"
#include "tests/support/errors.h"

namespace mddp::train {
namespace {

TrainConfig small_config() {
  TrainConfig c;
  c.data.spec = "synthetic";
  c.data.synthetic_size = 256;
  c.model.width = 16;
  c.model.depth = 2;
  c.batch = 16;
  c.optim = {.name = "sgd", .lr = 0.05f, .momentum = 0.9f};
  c.eval = false;
  return c;
}

std::vector<std::vector<float>> train_params(const TrainConfig& c, int steps) {
  Trainer t(c);
  for (int i = 0; i < steps; ++i) t.step();
  std::vector<std::vector<float>> out;
  for (auto* p : t.model().parameters()) out.push_back(p->value.to_vector());
  return out;
}

// Same seed: bitwise the same model after training; another seed: a different one.
TEST(Trainer, SameSeedIsBitwiseReproducible) {
  TrainConfig c = small_config();
  EXPECT_EQ(train_params(c, 20), train_params(c, 20));
  TrainConfig other = c;
  other.seed = 43;
  EXPECT_NE(train_params(c, 20), train_params(other, 20));
}

// Accumulating K micro-batches of b equals one step on K*b (in one process too).
TEST(Trainer, AccumulationEqualsALargerBatch) {
  TrainConfig k2 = small_config();
  k2.accumulate = 2;
  TrainConfig big = small_config();
  big.batch = 32;
  const auto a = train_params(k2, 6), b = train_params(big, 6);
  for (std::size_t p = 0; p < a.size(); ++p)
    for (std::size_t i = 0; i < a[p].size(); ++i)
      EXPECT_NEAR(a[p][i], b[p][i], 1e-5f * (1 + std::abs(b[p][i])));
}

// The GPT learns the synthetic chain: the loss falls from ln(vocab) toward
// the chain's entropy (0.80 nats), and the step reports its rate and norm.
TEST(Trainer, GptLearnsTheSyntheticTokenChain) {
  TrainConfig c;
  c.model = {.kind = "gpt", .classes = 16, .layers = 2, .heads = 2, .embd = 32, .block = 16};
  c.data = {.spec = "synthetic-tokens", .synthetic_size = 512};
  c.optim = {.name = "adamw", .lr = 1e-2f, .weight_decay = 0.1f, .grad_clip = 1.0f};
  c.lr_min = 1e-3f;
  c.batch = 16;
  c.steps = 60;
  Trainer t(c);
  EXPECT_EQ(t.tokens_per_sample(), 16);
  float first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    const StepResult r = t.step();
    if (i == 0) first = r.loss;
    last = r.loss;
    EXPECT_GT(r.grad_norm, 0.0f);
  }
  EXPECT_NEAR(first, std::log(16.0), 0.3);
  EXPECT_LT(last, 1.3f) << "from " << first;
  const EvalResult e = t.evaluate();
  EXPECT_LT(e.loss, 1.3);
  EXPECT_GT(e.accuracy, 0.5);  // of tokens: the likeliest successor is right 70% of the time
}

// Dropout's seeds: one per (seed, rank, step, micro-batch), so every rank
// draws its own masks, every step new ones, and a resume the same ones.
TEST(Trainer, DropoutSeedsDifferPerRankStepAndMicroBatch) {
  std::set<uint64_t> seen;
  for (uint64_t seed : {42, 43})
    for (int rank = 0; rank < 3; ++rank)
      for (int64_t step = 1; step <= 3; ++step)
        for (int64_t micro = 0; micro < 2; ++micro)
          EXPECT_TRUE(seen.insert(dropout_seed(seed, rank, step, micro)).second)
              << seed << " " << rank << " " << step << " " << micro;
  EXPECT_EQ(dropout_seed(42, 1, 2, 0), dropout_seed(42, 1, 2, 0));
}

// A GPT needs token data, and the other models refuse it.
TEST(Trainer, GptAndTokenDataGoTogether) {
  TrainConfig gpt;
  gpt.model.kind = "gpt";
  gpt.data.spec = "synthetic";
  EXPECT_THROW(Trainer{gpt}, InputError);
  TrainConfig mlp = small_config();
  mlp.data.spec = "synthetic-tokens";
  EXPECT_THROW(Trainer{mlp}, InputError);
}

// The loss on Fashion-MNIST goes down and the test accuracy rises far above chance.
TEST(Trainer, LearnsFashionMnist) {
  if (!std::filesystem::exists(data::kFashionMnistDir))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TrainConfig c;  // the defaults: Fashion-MNIST, FullMLP, Adam
  c.steps = 300;
  Trainer t(c);
  double first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    const float l = t.step().loss;
    if (i < 20) first += l / 20;
    if (i >= 280) last += l / 20;
  }
  EXPECT_LT(last, first * 0.6) << "loss did not go down: " << first << " -> " << last;
  const EvalResult e = t.evaluate();
  EXPECT_GT(e.accuracy, 0.7) << "test accuracy after 300 steps";
  EXPECT_EQ(e.samples, 10000);
}

// Impossible settings fail at construction with the flag's name in the message.
TEST(Trainer, RejectsBadConfigs) {
  const auto message = [](TrainConfig c) {
    try {
      Trainer t(c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  TrainConfig c = small_config();
  c.batch = 0;
  EXPECT_NE(message(c).find("--batch"), std::string::npos);
  c = small_config();
  c.optim.lr = -1;
  EXPECT_NE(message(c).find("--lr"), std::string::npos);
  c = small_config();
  c.model.kind = "cnn";
  EXPECT_NE(message(c).find("cnn"), std::string::npos);
  c = small_config();
  c.model.classes = 3;  // synthetic data is generated with the model's classes, so this is fine...
  EXPECT_EQ(message(c), "(accepted)");
  c = small_config();
  c.data.spec = "fashion-mnist";
  c.model.classes = 5;  // ...but Fashion-MNIST has 10
  if (std::filesystem::exists(data::kFashionMnistDir)) {
    EXPECT_NE(message(c).find("--classes"), std::string::npos);
  }
  c = small_config();
  c.device = "tpu";
  EXPECT_NE(message(c).find("unknown device"), std::string::npos);
  for (const char* bad : {"1", "1:forward", "x:forward:5", "1:optimizer:5", "1:forward:0",
                          "1:forward:5ms", "-1:data:5", "0:backward:1e9"}) {
    c = small_config();
    c.dist.straggler = bad;
    EXPECT_NE(message(c).find("--straggler '" + std::string(bad) + "'"), std::string::npos) << bad;
  }
  c = small_config();
  c.dist.straggler = "1:forward:5";  // a rank this one-process job lacks
  EXPECT_NE(message(c).find("rank 1 does not exist"), std::string::npos);
}

// --straggler's sleep lands in the phase it names, on the rank it names (a
// lower bound only: sleeping guarantees at least that long).
TEST(Trainer, StragglerSleepsInTheNamedPhaseOfTheNamedRank) {
  for (const char* phase : {"data", "forward", "backward"}) {
    TrainConfig c = small_config();
    c.dist.straggler = std::string("1:") + phase + ":40";
    Trainer straggler(c, /*rank=*/1, /*world_size=*/2);
    const StepTimes t = straggler.step().times;
    const double in_phase = std::string(phase) == "data"      ? t.data
                            : std::string(phase) == "forward" ? t.forward
                                                              : t.backward;
    EXPECT_GE(in_phase, 40.0) << phase;
    EXPECT_GE(t.total, in_phase) << phase;
  }
}

// The diagnosis Labs' seam (lab_fault.h): each kind parses, and a text that
// is none of them is an InputError naming MDDP_LAB_FAULT.
TEST(LabFault, ParsesEachKindAndRefusesOthers) {
  const LabFault hang = LabFault::parse("hang:2:57:backward");
  EXPECT_EQ(hang.kind, LabFault::Kind::kHang);
  EXPECT_EQ(hang.rank, 2);
  EXPECT_EQ(hang.step, 57);
  EXPECT_EQ(hang.phase, "backward");
  const LabFault slow = LabFault::parse("slow:1:data:4");
  EXPECT_EQ(slow.kind, LabFault::Kind::kSlow);
  EXPECT_EQ(slow.ms, 4.0);
  const LabFault nan = LabFault::parse("nan:3:12");
  EXPECT_EQ(nan.kind, LabFault::Kind::kNan);
  EXPECT_EQ(nan.step, 12);
  const LabFault mismatch = LabFault::parse("mismatch:0:depth");
  EXPECT_EQ(mismatch.kind, LabFault::Kind::kMismatch);
  EXPECT_EQ(mismatch.setting, "depth");
  TrainConfig c;
  LabFault::parse("short:1:40").adjust_config(1, c);
  EXPECT_EQ(c.steps, 40);
  mismatch.adjust_config(0, c);
  EXPECT_EQ(c.model.depth, TrainConfig{}.model.depth + 1);
  mismatch.adjust_config(1, c);  // another rank: untouched
  EXPECT_EQ(c.model.depth, TrainConfig{}.model.depth + 1);
  const LabFault link = LabFault::parse("link:2:3:40");
  EXPECT_EQ(link.kind, LabFault::Kind::kLink);
  EXPECT_EQ(link.peer, 3);
  EXPECT_EQ(link.mbps, 40.0);
  comm::CommOptions o;
  test::expect_input_error([&] { link.adjust_comm(0, 3, o); },
                           {"MDDP_LAB_FAULT 'link:2:3:40'", "rank 3 is not in a job of 3 ranks"});
  const LabFault flip = LabFault::parse("flip:1:3");
  EXPECT_EQ(flip.kind, LabFault::Kind::kFlip);
  EXPECT_EQ(flip.step, 3);
  EXPECT_EQ(LabFault::parse("").kind, LabFault::Kind::kNone);
  for (const char* bad :
       {"hang:1:5", "flip:1", "flip:1:x", "slow:1:sync:3", "nan:x:3", "nan:-1:3", "boom:1:2",
        "hang", "mismatch:1:heads", "short:1", "link:1:1:40", "link:1:2:0", "link:1:2"})
    test::expect_input_error([&] { LabFault::parse(bad); }, {"MDDP_LAB_FAULT", bad});
}

// The planted NaN reaches the named rank's loss at the named step, and no
// other step's or rank's: a regression target (a NaN input would vanish in
// the first ReLU).
TEST(LabFault, NanPoisonsTheNamedRanksTargetsAtTheNamedStep) {
  TrainConfig c = small_config();
  c.data.spec = "synthetic-regression";
  c.loss = "mse";
  c.model.classes = 0;
  c.allow_nonfinite_loss = true;
  ::setenv("MDDP_LAB_FAULT", "nan:1:3", 1);
  Trainer other(c, /*rank=*/0, /*world_size=*/2), poisoned(c, /*rank=*/1, /*world_size=*/2);
  ::unsetenv("MDDP_LAB_FAULT");
  for (int step = 1; step <= 3; ++step) {
    EXPECT_TRUE(std::isfinite(other.step().loss)) << step;
    EXPECT_EQ(std::isfinite(poisoned.step().loss), step < 3) << step;
  }
}

// The planted straggler sleeps in its phase of every step.
TEST(LabFault, SlowSleepsInTheNamedPhaseOfEveryStep) {
  ::setenv("MDDP_LAB_FAULT", "slow:1:forward:40", 1);
  Trainer slow(small_config(), /*rank=*/1, /*world_size=*/2);
  ::unsetenv("MDDP_LAB_FAULT");
  for (int step = 1; step <= 2; ++step) EXPECT_GE(slow.step().times.forward, 40.0) << step;
}

// The planted bit flip: after the named step's update, the named rank's
// first weight differs from an untouched replica's in one bit of one value.
TEST(LabFault, FlipChangesOneBitOfTheFirstWeightAfterTheNamedStep) {
  ::setenv("MDDP_LAB_FAULT", "flip:1:2", 1);
  Trainer flipped(small_config(), /*rank=*/1, /*world_size=*/2);
  ::unsetenv("MDDP_LAB_FAULT");
  Trainer plain(small_config(), /*rank=*/1, /*world_size=*/2);
  for (int step = 1; step <= 2; ++step) {
    flipped.step();
    plain.step();
    const auto params = flipped.model().parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> a = params[i]->value.to_vector();
      const std::vector<float> b = plain.model().parameters()[i]->value.to_vector();
      for (std::size_t j = 0; j < a.size(); ++j) {
        const uint32_t bits = std::bit_cast<uint32_t>(a[j]) ^ std::bit_cast<uint32_t>(b[j]);
        EXPECT_EQ(bits, step == 2 && i == 0 && j == 0 ? 1u : 0u) << step << " " << i << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace mddp::train
