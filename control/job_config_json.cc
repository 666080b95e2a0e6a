#include "control/job_config_json.h"

#include <set>

#include "core/common/check.h"
#include "core/common/json_number.h"

namespace mddp::control {
namespace {

using nlohmann::json;

// Reads the keys of one JSON object into fields, checking types; finish()
// rejects the keys nobody asked for.
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object())
      throw InputError(str("job config: '", where(), "' must be an object, got ", j_.dump()));
  }

  template <typename T>
  void operator()(const char* key, T& out) {
    auto it = j_.find(key);
    if (it == j_.end()) return;
    seen_.insert(key);
    read(*it, key, out);
  }
  Reader object(const char* key) {
    seen_.insert(key);
    static const json kEmpty = json::object();
    auto it = j_.find(key);
    return Reader(it == j_.end() ? kEmpty : *it, path_ + key + ".");
  }
  void finish() const {
    for (const auto& [k, v] : j_.items())
      if (!seen_.count(k))
        throw InputError(str("job config: unknown key '", path_, k,
                             "' (was the config written by another microddp version?)"));
  }

 private:
  std::string where() const { return path_.empty() ? "(root)" : path_.substr(0, path_.size() - 1); }
  [[noreturn]] void wrong(const char* key, const std::string& want, const json& v) const {
    throw InputError(str("job config: '", path_, key, "' must be ", want, ", got ", v.dump()));
  }
  // A number that fits T (json_number.h), or the refusal naming its range.
  template <typename T>
  T number(const json& v, const char* key) const {
    const std::optional<T> x = json_number<T>(v);
    if (x) return *x;
    if (!std::is_integral_v<T>) wrong(key, "a number", v);
    if (!v.is_number_integer()) wrong(key, "an integer", v);
    wrong(
        key,
        str("an integer in ", +std::numeric_limits<T>::min(), "..", +std::numeric_limits<T>::max()),
        v);
  }
  void read(const json& v, const char* key, std::string& out) const {
    if (!v.is_string()) wrong(key, "a string", v);
    out = v.get<std::string>();
  }
  void read(const json& v, const char* key, bool& out) const {
    if (!v.is_boolean()) wrong(key, "true or false", v);
    out = v.get<bool>();
  }
  void read(const json& v, const char* key, int64_t& out) const { out = number<int64_t>(v, key); }
  void read(const json& v, const char* key, int& out) const { out = number<int>(v, key); }
  void read(const json& v, const char* key, uint64_t& out) const { out = number<uint64_t>(v, key); }
  void read(const json& v, const char* key, double& out) const { out = number<double>(v, key); }
  void read(const json& v, const char* key, float& out) const { out = number<float>(v, key); }
  void read(const json& v, const char* key, std::vector<int64_t>& out) const {
    if (!v.is_array()) wrong(key, "an array of integers", v);
    out.clear();
    for (const auto& e : v) out.push_back(number<int64_t>(e, key));
  }

  const json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace

json job_config_to_json(const train::TrainConfig& c) {
  const auto& m = c.model;
  const auto& d = c.data;
  const auto& o = c.optim;
  const auto& s = c.dist;
  return {
      {"model",
       {{"kind", m.kind},
        {"width", m.width},
        {"depth", m.depth},
        {"classes", m.classes},
        {"channels", m.channels},
        {"hidden", m.hidden},
        {"layers", m.layers},
        {"heads", m.heads},
        {"embd", m.embd},
        {"block", m.block},
        {"dropout", m.dropout},
        {"seed", m.seed}}},
      {"loss", c.loss},
      {"data",
       {{"spec", d.spec},
        {"synthetic_size", d.synthetic_size},
        {"synthetic_test_size", d.synthetic_test_size},
        {"input_dim", d.input_dim},
        {"classes", d.classes},
        {"target_dim", d.target_dim},
        {"noise", d.noise},
        {"block", d.block},
        {"seed", d.seed}}},
      {"batch", c.batch},
      {"steps", c.steps},
      {"epochs", c.epochs},
      {"optim",
       {{"name", o.name},
        {"lr", o.lr},
        {"momentum", o.momentum},
        {"weight_decay", o.weight_decay},
        {"beta1", o.beta1},
        {"beta2", o.beta2},
        {"eps", o.eps},
        {"grad_clip", o.grad_clip}}},
      {"warmup_steps", c.warmup_steps},
      {"lr_min", c.lr_min},
      {"accumulate", c.accumulate},
      {"seed", c.seed},
      {"device", c.device},
      {"run_dir", c.run_dir},
      {"init_from", c.init_from},
      {"resume", c.resume},
      {"checkpoint_every", c.checkpoint_every},
      {"keep_checkpoints", c.keep_checkpoints},
      {"resume_latest", c.resume_latest},
      {"min_nproc", c.min_nproc},
      {"threads", c.threads},
      {"log_every", c.log_every},
      {"eval", c.eval},
      {"allow_nonfinite_loss", c.allow_nonfinite_loss},
      {"precision", c.precision},
      {"loss_scale", {{"init", c.loss_scale.init}, {"window", c.loss_scale.window}}},
      {"dist",
       {{"ddp", s.ddp},
        {"bucket_mb", s.bucket_mb},
        {"first_bucket_mb", s.first_bucket_mb},
        {"compress", s.compress},
        {"local_sgd", s.local_sgd},
        {"algorithm", s.algorithm},
        {"transport", s.transport},
        {"backend", s.backend},
        {"timeout_ms", s.timeout_ms},
        {"straggler", s.straggler}}},
  };
}

namespace {

// One reader per nested object of the config, each rejecting unknown keys.
void read_model(Reader r, nn::ModelConfig& m) {
  r("kind", m.kind);
  r("width", m.width);
  r("depth", m.depth);
  r("classes", m.classes);
  r("channels", m.channels);
  r("hidden", m.hidden);
  r("layers", m.layers);
  r("heads", m.heads);
  r("embd", m.embd);
  r("block", m.block);
  r("dropout", m.dropout);
  r("seed", m.seed);
  r.finish();
}

void read_data(Reader r, data::DatasetConfig& d) {
  r("spec", d.spec);
  r("synthetic_size", d.synthetic_size);
  r("synthetic_test_size", d.synthetic_test_size);
  r("input_dim", d.input_dim);
  r("classes", d.classes);
  r("target_dim", d.target_dim);
  r("noise", d.noise);
  r("block", d.block);
  r("seed", d.seed);
  r.finish();
}

void read_optim(Reader r, nn::OptimizerConfig& o) {
  r("name", o.name);
  r("lr", o.lr);
  r("momentum", o.momentum);
  r("weight_decay", o.weight_decay);
  r("beta1", o.beta1);
  r("beta2", o.beta2);
  r("eps", o.eps);
  r("grad_clip", o.grad_clip);
  r.finish();
}

void read_loss_scale(Reader r, train::LossScaleConfig& s) {
  r("init", s.init);
  r("window", s.window);
  r.finish();
}

void read_dist(Reader r, train::DistConfig& s) {
  r("ddp", s.ddp);
  r("bucket_mb", s.bucket_mb);
  r("first_bucket_mb", s.first_bucket_mb);
  r("compress", s.compress);
  r("local_sgd", s.local_sgd);
  r("algorithm", s.algorithm);
  r("transport", s.transport);
  r("backend", s.backend);
  r("timeout_ms", s.timeout_ms);
  r("straggler", s.straggler);
  r.finish();
}

}  // namespace

train::TrainConfig job_config_from_json(const json& j) {
  train::TrainConfig c;
  Reader r(j, "");
  read_model(r.object("model"), c.model);
  r("loss", c.loss);
  read_data(r.object("data"), c.data);
  r("batch", c.batch);
  r("steps", c.steps);
  r("epochs", c.epochs);
  read_optim(r.object("optim"), c.optim);
  r("warmup_steps", c.warmup_steps);
  r("lr_min", c.lr_min);
  r("accumulate", c.accumulate);
  r("seed", c.seed);
  r("device", c.device);
  r("run_dir", c.run_dir);
  r("init_from", c.init_from);
  r("resume", c.resume);
  r("checkpoint_every", c.checkpoint_every);
  r("keep_checkpoints", c.keep_checkpoints);
  r("resume_latest", c.resume_latest);
  r("min_nproc", c.min_nproc);
  r("threads", c.threads);
  r("log_every", c.log_every);
  r("eval", c.eval);
  r("allow_nonfinite_loss", c.allow_nonfinite_loss);
  r("precision", c.precision);
  read_loss_scale(r.object("loss_scale"), c.loss_scale);
  read_dist(r.object("dist"), c.dist);
  r.finish();
  return c;
}

std::string dump_job_config(const train::TrainConfig& cfg) {
  return job_config_to_json(cfg).dump();
}

train::TrainConfig parse_job_config(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large
    throw InputError(str("job config is not valid JSON: ", e.what()));
  }
  return job_config_from_json(j);
}

}  // namespace mddp::control
