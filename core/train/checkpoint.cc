#include "core/train/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/common/check.h"
#include "mddp/config.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSuffix = ".safetensors";
constexpr std::string_view kStateSuffix = ".state.safetensors";

bool ends_with(const std::string& s, std::string_view tail) {
  return s.ends_with(tail);
}

// FNV-1a, 64 bits: a content id, not a defence against forgery.
class Fnv1a {
 public:
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, h_);
    return buf;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// The id of a pair: its step and every tensor's name and bytes, so the same
// training state always gets the same id (and the same files).
std::string content_id(const CheckpointContents& c) {
  Fnv1a h;
  h.add(&c.step, sizeof c.step);
  for (const auto* list : {&c.weights, &c.state})
    for (const auto& t : *list) {
      h.add(t.name.data(), t.name.size() + 1);
      const std::vector<float> v = t.value.to_vector();
      h.add(v.data(), v.size() * sizeof(float));
    }
  return h.hex();
}

std::string meta(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

// Why the file's metadata is not one of a checkpoint of this format ("" if it is).
std::string format_problem(const std::map<std::string, std::string>& m) {
  const std::string f = meta(m, "format");
  if (f == kCheckpointFormat) return "";
  if (f.empty())
    return "it is not a microddp checkpoint (no 'format' in its metadata); a plain state_dict can "
           "seed a run "
           "with --init-from";
  return str("its format is '", f, "', this microddp reads '", kCheckpointFormat, "'");
}

int64_t step_of(const std::map<std::string, std::string>& m, const std::string& path) {
  const std::string s = meta(m, "step");
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size() && v >= 0) return v;
  } catch (const std::logic_error&) {
  }
  throw InputError(
      str("'", path, "' is not a valid checkpoint: its step '", s, "' is not a number"));
}

// The step of the complete pair at `model_path` (by the headers alone), or
// why it is not one; `ours` when the model file is a microddp checkpoint.
struct PairCheck {
  std::optional<int64_t> step;
  std::string problem;
  bool ours = false;
};
PairCheck check_pair(const std::string& model_path) {
  try {
    const auto m = load_safetensors_metadata(model_path);
    if (const std::string p = format_problem(m); !p.empty()) return {std::nullopt, p};
    const std::string state = state_path_of(model_path);
    if (!fs::exists(state)) return {std::nullopt, "its state file is missing", true};
    const auto s = load_safetensors_metadata(state);
    if (meta(s, "checkpoint_id") != meta(m, "checkpoint_id"))
      return {std::nullopt, "its two files are of different checkpoints", true};
    return {step_of(m, model_path), "", true};
  } catch (const InputError& e) {
    return {std::nullopt, e.what()};
  }
}

// Why the pair's tensors are not the ones written ("" when they are): both
// files read whole, every tensor checked against its checksum.
std::string pair_damage(const std::string& model_path) {
  try {
    (void)load_safetensors(model_path);
    (void)load_safetensors(state_path_of(model_path));
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

// Model files (not state files, not temporaries) in `dir`.
std::vector<std::string> model_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string p = e.path().string();
    if (e.is_regular_file(ec) && ends_with(p, kSuffix) && !ends_with(p, kStateSuffix))
      out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string state_path_of(const std::string& model_path) {
  const std::string stem = ends_with(model_path, kSuffix)
                               ? model_path.substr(0, model_path.size() - kSuffix.size())
                               : model_path;
  return stem + std::string(kStateSuffix);
}

std::string final_checkpoint_path(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoint.safetensors").string();
}

std::string periodic_checkpoint_path(const std::string& run_dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "step-%08lld.safetensors", static_cast<long long>(step));
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

void write_checkpoint(const std::string& model_path, const CheckpointContents& c) {
  const fs::path dir = fs::path(model_path).parent_path();
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  if (ec)
    throw Error(str("cannot create the checkpoint directory '", dir.string(), "': ", ec.message()));
  const std::map<std::string, std::string> common = {{"format", kCheckpointFormat},
                                                     {"step", std::to_string(c.step)},
                                                     {"checkpoint_id", content_id(c)},
                                                     {"microddp_version", MDDP_VERSION}};
  auto model_meta = c.model_metadata, state_meta = c.state_metadata;
  for (const auto& [k, v] : common) model_meta[k] = state_meta[k] = v;
  // Both files' data first: a full disk or a read-only directory fails here,
  // before anything under the real names changed. Then the two renames,
  // state first (Note [Pair order] in checkpoint.h).
  const std::string state_path = state_path_of(model_path);
  try {
    write_temp(state_path, c.state, state_meta);
    write_temp(model_path, c.weights, model_meta);
  } catch (...) {
    discard_temp(state_path);
    discard_temp(model_path);
    throw;
  }
  try {
    commit_temp(state_path);
  } catch (...) {
    discard_temp(model_path);
    throw;
  }
  commit_temp(model_path);
}

Checkpoint read_checkpoint(const std::string& model_path) {
  Checkpoint c;
  c.path = model_path;
  c.state_path = state_path_of(model_path);
  c.model = load_safetensors(model_path);
  if (const std::string p = format_problem(c.model.metadata); !p.empty())
    throw InputError(str("cannot resume from '", model_path, "': ", p));
  if (!fs::exists(c.state_path))
    throw InputError(
        str("cannot resume from '", model_path, "': its state file '", c.state_path,
            "' is missing (resuming needs both files; --init-from takes the weights alone)"));
  c.state = load_safetensors(c.state_path);
  if (const std::string p = format_problem(c.state.metadata); !p.empty())
    throw InputError(str("cannot resume from '", c.state_path, "': ", p));
  c.id = meta(c.model.metadata, "checkpoint_id");
  const std::string state_id = meta(c.state.metadata, "checkpoint_id");
  if (c.id.empty() || c.id != state_id)
    throw InputError(
        str("cannot resume from '", model_path, "': it and '", c.state_path,
            "' are of different checkpoints (checkpoint_id '", c.id, "' vs '", state_id,
            "'): a write was cut off between the two files; resume from the directory to take "
            "the newest complete pair"));
  c.step = step_of(c.model.metadata, model_path);
  if (step_of(c.state.metadata, c.state_path) != c.step)
    throw InputError(
        str("cannot resume from '", model_path, "': its state file is of another step"));
  return c;
}

std::string find_checkpoint(const std::string& dir_or_file, const std::string& flag) {
  std::error_code ec;
  if (!fs::exists(dir_or_file, ec))
    throw InputError(str(flag, " ", dir_or_file, ": no such file or directory"));
  if (!fs::is_directory(dir_or_file, ec)) {
    if (ends_with(dir_or_file, kStateSuffix))
      return dir_or_file.substr(0, dir_or_file.size() - kStateSuffix.size()) + std::string(kSuffix);
    return dir_or_file;
  }
  std::vector<std::string> candidates = model_files_in(fs::path(dir_or_file) / "checkpoints");
  for (const std::string& f : model_files_in(dir_or_file)) candidates.push_back(f);
  // Complete pairs by their headers, newest first; the first whose tensors
  // match their checksums wins. Every microddp pair passed over is a
  // warning: resuming from an older step than the newest must not be silent.
  std::vector<std::pair<int64_t, std::string>> pairs;
  std::string passed_over;
  const auto pass_over = [&](const std::string& f, const std::string& why, bool warn) {
    if (warn) spdlog::warn("{} {}: skipping {}: {}", flag, dir_or_file, f, why);
    if (passed_over.empty()) passed_over = str(" (passed over ", f, ": ", why, ")");
  };
  for (const std::string& f : candidates) {
    const PairCheck pc = check_pair(f);
    if (pc.step)
      pairs.emplace_back(*pc.step, f);
    else
      pass_over(f, pc.problem, pc.ours);
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [step, f] : pairs) {
    const std::string damage = pair_damage(f);
    if (damage.empty()) return f;
    pass_over(f, damage, true);
  }
  throw InputError(str(
      flag, " ", dir_or_file, ": no complete checkpoint in it (looked for checkpoint.safetensors, ",
      "checkpoints/step-*.safetensors and *.safetensors, each with its .state.safetensors)",
      passed_over));
}

void prune_checkpoints(const std::string& run_dir, int64_t keep) {
  if (keep <= 0) return;
  const std::vector<std::string> files =
      model_files_in(fs::path(run_dir) / "checkpoints");  // step-%08d: sorted by step
  const auto n = static_cast<int64_t>(files.size());
  for (int64_t i = 0; i + keep < n; ++i) {
    std::error_code ec;
    fs::remove(
        files[i],
        ec);  // the model file first: a half-pruned pair is incomplete, never mistaken for whole
    fs::remove(state_path_of(files[i]), ec);
  }
}

}  // namespace mddp::train
