// `microddp sample`: text from a trained GPT. The model and its vocabulary
// come from the checkpoint's model file alone (core/train/text_generation.h);
// the tokens are drawn one at a time by nn::generate (core/nn/generate.h).
// Prints the prompt and the generated characters, nothing else, so the
// output can be piped.
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/tensor/device.h"
#include "core/tensor/ops.h"
#include "core/train/text_generation.h"

namespace mddp::cli {
namespace {

struct SampleFlags {
  std::string checkpoint, prompt, device = "cpu";
  int64_t tokens = 200;
  nn::SamplingOptions options{.temperature = 0.8f, .top_k = 0};
  uint64_t seed = 42;
  int threads = 1;
};

void sample(const SampleFlags& f) {
  const tensor::Device device = tensor::Device::parse(f.device);
  tensor::require_available(device);
  tensor::set_num_threads(f.threads);
  train::GptCheckpoint c = train::load_gpt_checkpoint(f.checkpoint, "--checkpoint", device);
  // The prompt is checked before any token is generated: a typo fails at once.
  const std::string text =
      train::generate_text(*c.model, c.tokenizer, f.prompt, f.tokens, f.options, f.seed);
  std::printf("%s\n", text.c_str());
}

}  // namespace

void register_sample(CLI::App& app) {
  // An integer range, so that the refusal reads "0 to 9223372036854775807", not in doubles.
  const CLI::Range non_negative_count(int64_t{0}, std::numeric_limits<int64_t>::max());
  auto f = std::make_shared<SampleFlags>();
  auto* cmd =
      app.add_subcommand("sample", "Generate text with a GPT trained on --dataset text:PATH");
  cmd->add_option("--checkpoint", f->checkpoint,
                  "a checkpoint's model file, or a run directory (its newest complete checkpoint)")
      ->required();
  cmd->add_option("--prompt", f->prompt,
                  "the text to continue, printed before the generated characters; every character "
                  "must be in the model's vocabulary (default empty: start from a newline, or from "
                  "the vocabulary's first character when it has none)");
  cmd->add_option("--tokens", f->tokens, "how many characters to generate")
      ->check(non_negative_count)
      ->capture_default_str();
  cmd->add_option("--temperature", f->options.temperature,
                  "divides the logits: below 1 sharper, above 1 flatter; 0: always the likeliest")
      ->check(finite_in(0))
      ->capture_default_str();
  cmd->add_option("--top-k", f->options.top_k,
                  "draw only among the K likeliest characters; 0: all, 1: always the likeliest")
      ->check(non_negative_count)
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "the seed of the draws: the same seed, the same text")
      ->capture_default_str();
  cmd->add_option("--device", f->device, "cpu, cuda or cuda:K")->capture_default_str();
  cmd->add_option("--threads", f->threads, "compute threads")
      ->check(CLI::Range(1, kMaxThreads))
      ->capture_default_str();
  cmd->callback([f] { sample(*f); });
}

}  // namespace mddp::cli
