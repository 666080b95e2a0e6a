#include "core/train/text_generation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/data/utf8.h"
#include "core/train/checkpoint.h"
#include "core/train/checkpoint_meta.h"
#include "core/train/safetensors.h"

namespace mddp::train {
namespace {

using nlohmann::json;

// The metadata document `key` of a model file as a JSON object (null when absent or not one).
json metadata_document(const Safetensors& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  if (it == file.metadata.end()) return nullptr;
  json j = json::parse(it->second, nullptr, false);
  return j.is_object() ? j : json(nullptr);
}

// The GPT's config from the `model` document, checked enough that building
// the model cannot fail on it.
nn::GptConfig gpt_config_of(const Safetensors& file, const std::string& what) {
  const json model = metadata_document(file, "model");
  if (model.is_null())
    throw InputError(
        str(what,
            ": no microddp model description in its metadata (a PyTorch "
            "state_dict?); sample reads a checkpoint of `microddp train --model gpt`"));
  const std::string type = model.value("type", "");
  if (type != "GPT")
    throw InputError(str(what, ": a checkpoint of a ", type.empty() ? "model of no type" : type,
                         ", not of a GPT; sample reads one trained with --model gpt"));
  const json c = model.value("config", json::object());
  const auto positive = [&](const char* key) {
    const auto it = c.find(key);
    if (it == c.end() || !it->is_number_integer() || it->get<int64_t>() < 1)
      throw InputError(str(what, ": its GPT config has no positive integer ", key));
    return it->get<int64_t>();
  };
  nn::GptConfig cfg{.vocab = positive("vocab_size"),
                    .block = positive("block_size"),
                    .layers = positive("n_layer"),
                    .heads = positive("n_head"),
                    .embd = positive("n_embd")};
  if (cfg.embd % cfg.heads != 0)
    throw InputError(str(what, ": its GPT config's n_embd ", cfg.embd,
                         " is not a multiple of n_head ", cfg.heads));
  return cfg;  // dropout stays 0: generation never drops
}

// The tokenizer from the `dataset` document's vocabulary.
data::CharTokenizer tokenizer_of(const Safetensors& file, const std::string& what) {
  const json dataset = metadata_document(file, "dataset");
  const auto v = dataset.is_object() ? dataset.find("vocabulary") : dataset.end();
  if (v == dataset.end() || !v->is_string())
    throw InputError(str(what, ": no vocabulary in its metadata (a GPT trained on ",
                         dataset.is_object() ? dataset.value("spec", "?") : "?",
                         "); sample reads one trained on --dataset text:PATH"));
  try {
    return data::CharTokenizer::from_vocabulary(v->get<std::string>());
  } catch (const InputError& e) {
    throw InputError(str(what, ": ", e.what()));
  }
}

// The vocabulary's first characters as a JSON string ("\n !',-.ABC..."),
// for an error message to show what the model can read.
std::string vocabulary_preview(const data::CharTokenizer& tokenizer) {
  constexpr int64_t kShown = 24;
  std::u32string head;
  for (int64_t i = 0; i < std::min(kShown, tokenizer.size()); ++i)
    head.push_back(tokenizer.character(i));
  const std::string more = tokenizer.size() > kShown ? " and more" : "";
  return json(data::encode_utf8(head)).dump() + more;
}

}  // namespace

GptCheckpoint load_gpt_checkpoint(const std::string& dir_or_file, const std::string& flag,
                                  tensor::Device device) {
  const std::string path = find_checkpoint(dir_or_file, flag);
  const std::string what = str(flag, " ", path);
  Safetensors file = load_safetensors(path);
  const nn::GptConfig cfg = gpt_config_of(file, what);
  data::CharTokenizer tokenizer = tokenizer_of(file, what);
  if (tokenizer.size() != cfg.vocab)
    throw InputError(str(what, ": its vocabulary has ", tokenizer.size(),
                         " characters, its GPT config's vocab_size is ", cfg.vocab));
  Rng unused(0);  // every weight is then replaced by the file's
  auto model = std::make_unique<nn::Gpt>(cfg, unused, device);
  copy_model_weights(*model, file, what);
  return {.path = path, .model = std::move(model), .tokenizer = std::move(tokenizer)};
}

std::vector<int64_t> prompt_ids(const data::CharTokenizer& tokenizer, const std::string& prompt,
                                const std::string& flag) {
  if (prompt.empty()) {  // a newline starts a fresh line, as the corpus's text does
    for (int64_t id = 0; id < tokenizer.size(); ++id)
      if (tokenizer.character(id) == U'\n') return {id};
    return {0};
  }
  const std::u32string text = data::decode_utf8(prompt, flag);
  try {
    const std::vector<data::TokenId> ids = tokenizer.encode(text);
    return {ids.begin(), ids.end()};
  } catch (const InputError& e) {
    throw InputError(str(flag, ": ", e.what(), "; the model reads ", tokenizer.size(),
                         " characters: ", vocabulary_preview(tokenizer)));
  }
}

std::string generate_text(nn::Gpt& model, const data::CharTokenizer& tokenizer,
                          const std::string& prompt, int64_t tokens,
                          const nn::SamplingOptions& options, uint64_t seed) {
  Rng rng(seed);
  const std::vector<int64_t> ids =
      nn::generate(model, prompt_ids(tokenizer, prompt, "--prompt"), tokens, options, rng);
  return prompt + tokenizer.decode(ids);
}

std::string evaluation_sample(nn::Module& model, const data::Dataset& train_set, uint64_t seed) {
  auto* gpt = dynamic_cast<nn::Gpt*>(&model);
  const std::string vocabulary = train_set.vocabulary();
  if (!gpt || vocabulary.empty()) return "";
  return generate_text(*gpt, data::CharTokenizer::from_vocabulary(vocabulary), "",
                       kEvalSampleTokens, {.temperature = kEvalSampleTemperature}, seed);
}

}  // namespace mddp::train
