#include "core/train/checkpoint_meta.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/data/factory.h"
#include "core/data/utf8.h"
#include "core/nn/gpt.h"
#include "core/nn/sequential.h"

namespace mddp::train {
namespace {

using nlohmann::json;

// The shortest text that reads back as the same float ("0.001", not 0.0010000000474974513).
std::string float_text(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

}  // namespace

namespace {

json spec_json(const nn::LayerSpec& l) {
  json j = {{"type", l.type}};
  for (const auto& [k, v] : l.args) j[k] = v;
  return j;
}

// How to rebuild the model: its layers, or the GPT's config and tied weight.
json architecture(nn::Module& model) {
  if (auto* seq = dynamic_cast<nn::Sequential*>(&model)) {
    json layers = json::array();
    for (const nn::LayerSpec& l : seq->layer_specs()) layers.push_back(spec_json(l));
    return {{"type", "Sequential"}, {"layers", layers}};
  }
  json config = spec_json(model.spec());
  config.erase("type");
  json j = {{"type", model.spec().type}, {"config", config}};
  if (auto* gpt = dynamic_cast<nn::Gpt*>(&model)) {
    j["config"]["dropout"] = gpt->config().dropout;
    j["config"]["bias"] = true;
    j["tied"] = {{"lm_head.weight", "transformer.wte.weight"}};  // Note [Tied weight]
  }
  return j;
}

}  // namespace

std::string model_json(nn::Module& model, const tensor::Shape& sample_shape,
                       const std::string& loss) {
  json j = architecture(model);
  j["input_shape"] = sample_shape;
  j["loss"] = loss == "mse" ? "MSELoss" : "CrossEntropyLoss";
  j["parameters"] = model.num_parameters();
  j["summary"] = model.describe();
  return j.dump();
}

std::string input_json(const data::Dataset& d) {
  const data::InputEncoding e = d.input_encoding();
  return json{{"raw", e.raw},
              {"scale", e.scale},
              {"mean", e.mean},
              {"std", e.std},
              {"formula", "x = (raw / scale - mean) / std, in float32"}}
      .dump();
}

std::string dataset_json(const std::string& spec, const data::Dataset& d) {
  json j = {{"spec", spec},
            {"source", data::dataset_source(spec)},
            {"classes", d.num_classes()},
            {"class_names", data::class_names(spec)},
            {"sample_shape", d.sample_shape()},
            {"target_dim", d.target_dim()},
            {"train_samples", d.size()}};
  // Only text has one; the other datasets' checkpoints stay as they were.
  if (const std::string v = d.vocabulary(); !v.empty()) j["vocabulary"] = v;
  return j.dump();
}

void check_vocabulary(const Safetensors& file, const data::Dataset& d, const std::string& what) {
  const auto it = file.metadata.find("dataset");
  if (it == file.metadata.end()) return;
  const json saved = json::parse(it->second, nullptr, false);
  const auto v = saved.is_object() ? saved.find("vocabulary") : saved.end();
  const std::string there = v != saved.end() && v->is_string() ? v->get<std::string>() : "";
  const std::string here = d.vocabulary();
  if (there == here) return;
  const std::u32string a = data::decode_utf8(there, what + ": its vocabulary");
  const std::u32string b = data::decode_utf8(here, "the data's vocabulary");
  const std::size_t i = static_cast<std::size_t>(
      std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
  const auto at = [i](const std::u32string& s) {
    return i < s.size() ? data::char_name(s[i]) : std::string("past its end");
  };
  throw InputError(str(what, ": its vocabulary (", a.size(), " characters) is not the data's (",
                       b.size(), " characters): id ", i, " is ", at(a), " there, ", at(b),
                       " here, so its token ids would mean other characters"));
}

void copy_model_weights(nn::Module& model, const Safetensors& file, const std::string& what) {
  std::vector<std::pair<std::string, tensor::Tensor>> params;
  for (nn::Parameter* p : model.parameters()) params.emplace_back(p->name, p->value);
  copy_tensors_by_name(params, file, what);
}

std::map<std::string, std::string> config_fingerprint(const TrainConfig& c, int world_size) {
  std::map<std::string, std::string> f = {
      {"--model", c.model.kind},
      {"--width", std::to_string(c.model.width)},
      {"--depth", std::to_string(c.model.depth)},
      {"--classes", std::to_string(c.model.classes)},
      {"--channels", list_text(c.model.channels)},
      {"--hidden", std::to_string(c.model.hidden)},
      {"--loss", c.loss},
      {"--dataset", c.data.spec},
      {"--synthetic-size", std::to_string(c.data.synthetic_size)},
      {"--batch", std::to_string(c.batch)},
      {"--accumulate", std::to_string(c.accumulate)},
      {"--last-batch", c.last_batch},
      {"--optimizer", c.optim.name},
      {"--lr", float_text(c.optim.lr)},
      {"--momentum", float_text(c.optim.momentum)},
      {"--weight-decay", float_text(c.optim.weight_decay)},
      {"--seed", std::to_string(c.seed)},
      {"--nproc", std::to_string(world_size)},
  };
  if (c.data.spec.starts_with("text:"))  // the window length shapes the samples
    f["--block"] = std::to_string(c.data.block);
  if (world_size > 1) {  // how gradients are summed decides the rounding
    f["--ddp"] = c.dist.ddp;
    f["--bucket-mb"] = str(c.dist.bucket_mb);
    f["--first-bucket-mb"] = str(c.dist.first_bucket_mb);
    f["--compress"] = c.dist.compress;
    f["--local-sgd"] = std::to_string(c.dist.local_sgd);
    f["--algo"] = c.dist.algorithm;
    f["--transport"] = c.dist.transport;
  }
  if (c.model.kind == "gpt") {  // only then: the other models' checkpoints still match
    f["--layers"] = std::to_string(c.model.layers);
    f["--heads"] = std::to_string(c.model.heads);
    f["--embd"] = std::to_string(c.model.embd);
    f["--block"] = std::to_string(c.model.block);
    f["--dropout"] = float_text(c.model.dropout);
  }
  // The schedule and clipping, when on (runs from before them still match).
  if (c.optim.grad_clip != 0.0f) f["--grad-clip"] = float_text(c.optim.grad_clip);
  if (c.warmup_steps != 0) f["--warmup-steps"] = std::to_string(c.warmup_steps);
  if (c.lr_min >= 0.0f) f["--lr-min"] = float_text(c.lr_min);
  if (c.precision != "fp32") {  // only then: fp32 checkpoints from before --precision still match
    f["--precision"] = c.precision;
    if (c.precision == "fp16") {
      f["--loss-scale"] = float_text(c.loss_scale.init);
      f["--loss-scale-window"] = std::to_string(c.loss_scale.window);
    }
  }
  return f;
}

std::map<std::string, std::string> state_metadata(const TrainConfig& cfg, int world_size,
                                                  const TrainingProgress& p) {
  const nn::OptimizerConfig& o = cfg.optim;
  return {
      {"config", json(config_fingerprint(cfg, world_size)).dump()},
      {"optimizer", json{{"name", o.name},
                         {"step", p.optimizer_steps},
                         {"lr", o.lr},
                         {"momentum", o.momentum},
                         {"weight_decay", o.weight_decay},
                         {"beta1", o.beta1},
                         {"beta2", o.beta2},
                         {"eps", o.eps},
                         {"grad_clip", o.grad_clip}}
                        .dump()},
      // A function of the step (core/nn/lr_schedule.h): the step is its position.
      {"schedule", json{{"kind", "linear warm-up, then cosine decay to lr_min (none if < 0)"},
                        {"lr", o.lr},
                        {"lr_min", cfg.lr_min},
                        {"warmup_steps", cfg.warmup_steps},
                        {"total_steps", cfg.steps > 0 ? cfg.steps : cfg.epochs * p.steps_per_epoch},
                        {"step", p.step}}
                       .dump()},
      {"sampler", json{{"epoch", p.step / p.steps_per_epoch},
                       {"step_in_epoch", p.step % p.steps_per_epoch},
                       {"steps_per_epoch", p.steps_per_epoch},
                       {"global_batch", cfg.batch * cfg.accumulate},
                       {"last_batch", cfg.last_batch},
                       {"dataset_size", p.dataset_size},
                       {"shuffle_seed", cfg.seed}}
                      .dump()},
      // Nothing random is drawn step by step: every stream is a function of
      // the seed (and the epoch), so the seed is the whole random state.
      {"random", json{{"seed", cfg.seed},
                      {"model_init", "mddp::Rng(seed), layer by layer"},
                      {"data_order", "permutation of epoch e from mddp::Rng(derive_seed(seed, e))"},
                      {"synthetic_data", "generated once from the seed"},
                      {"dropout", "masks from derive_seed of (seed, rank, step, micro-batch)"}}
                     .dump()},
  };
}

namespace {

json metadata_json(const Checkpoint& c, const std::string& key) {
  const auto it = c.state.metadata.find(key);
  json j = it == c.state.metadata.end() ? json() : json::parse(it->second, nullptr, false);
  if (!j.is_object())
    throw InputError(
        str("cannot resume from '", c.state_path, "': no valid '", key, "' in its metadata"));
  return j;
}

// --ddp sharded is bucketed mode's buckets with the optimiser step split
// over the ranks, and its checkpoints hold the whole state under the same
// names (core/train/sharded_optimizer.h): either resumes the other's.
bool same_buckets(const std::string& flag, const std::string& there, const std::string& here) {
  const auto bucketed = [](const std::string& m) { return m == "bucketed" || m == "sharded"; };
  return flag == "--ddp" && bucketed(there) && bucketed(here);
}
}  // namespace

void check_resumable(const Checkpoint& c, const TrainConfig& cfg, int world_size) {
  const json saved = metadata_json(c, "config");
  if (!saved.contains("--nproc"))
    throw InputError(
        str("cannot resume from '", c.state_path, "': its 'config' fingerprint has no world size"));
  const auto now = config_fingerprint(cfg, world_size);
  std::string diffs;
  int n = 0;
  const auto differ = [&](const std::string& flag, const std::string& there,
                          const std::string& here) {
    diffs += str(n++ ? "; " : "", flag, " ", there, " there, ", here, " here");
  };
  // A flag only one side has is a DDP flag of a multi-rank job, and then --nproc differs already.
  for (const auto& [flag, here] : now) {
    const auto s = saved.find(flag);
    if (s == saved.end()) continue;
    // An elastic job (--min-nproc, --on-failure shrink) may resume on another number of ranks.
    if (flag == "--nproc" && (cfg.min_nproc > 0 || cfg.survivors_train_on())) continue;
    const std::string there = s->is_string() ? s->get<std::string>() : s->dump();
    if (there != here && !same_buckets(flag, there, here)) differ(flag, there, here);
  }
  if (n > 0)
    throw InputError(
        str("cannot resume from '", c.path, "': it was written by a different job (", diffs,
            "). Resume with the same flags, or start a new job from its weights with --init-from"));
  const json sampler = metadata_json(c, "sampler");
  const int64_t per_epoch = sampler.value("steps_per_epoch", int64_t{1});
  const int64_t total = cfg.steps > 0 ? cfg.steps : cfg.epochs * per_epoch;
  if (c.step >= total)
    throw InputError(str("cannot resume from '", c.path, "': it is at step ", c.step,
                         " and this job trains ", total,
                         " steps in all, so nothing is left to do; raise --steps (or --epochs)"));
}

Checkpoint checked_resume(const TrainConfig& cfg, int world_size) {
  Checkpoint c = read_checkpoint(find_checkpoint(cfg.resume));
  check_resumable(c, cfg, world_size);
  return c;
}

std::optional<Checkpoint> resume_point(const TrainConfig& cfg, int world_size) {
  std::optional<Checkpoint> from;
  if (!cfg.resume.empty()) from = checked_resume(cfg, world_size);
  if (!cfg.resume_latest || cfg.run_dir.empty() || !std::filesystem::is_directory(cfg.run_dir))
    return from;
  std::string newest;
  try {
    newest = find_checkpoint(cfg.run_dir);
  } catch (const InputError&) {
    return from;  // none written yet: where the job started
  }
  Checkpoint latest = read_checkpoint(newest);
  if (from && latest.step <= from->step) return from;
  check_resumable(latest, cfg, world_size);
  return latest;
}

int checkpoint_world_size(const Checkpoint& c) {
  const json saved = metadata_json(c, "config");
  const auto it = saved.find("--nproc");
  if (it == saved.end() || !it->is_string()) return 0;
  try {
    return std::stoi(it->get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace mddp::train
