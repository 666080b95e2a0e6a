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

train::TrainConfig job_config_from_json(const json& j) {
  train::TrainConfig c;
  Reader r(j, "");
  {
    Reader m = r.object("model");
    m("kind", c.model.kind);
    m("width", c.model.width);
    m("depth", c.model.depth);
    m("classes", c.model.classes);
    m("channels", c.model.channels);
    m("hidden", c.model.hidden);
    m("layers", c.model.layers);
    m("heads", c.model.heads);
    m("embd", c.model.embd);
    m("block", c.model.block);
    m("dropout", c.model.dropout);
    m("seed", c.model.seed);
    m.finish();
  }
  r("loss", c.loss);
  {
    Reader d = r.object("data");
    d("spec", c.data.spec);
    d("synthetic_size", c.data.synthetic_size);
    d("synthetic_test_size", c.data.synthetic_test_size);
    d("input_dim", c.data.input_dim);
    d("classes", c.data.classes);
    d("target_dim", c.data.target_dim);
    d("noise", c.data.noise);
    d("block", c.data.block);
    d("seed", c.data.seed);
    d.finish();
  }
  r("batch", c.batch);
  r("steps", c.steps);
  r("epochs", c.epochs);
  {
    Reader o = r.object("optim");
    o("name", c.optim.name);
    o("lr", c.optim.lr);
    o("momentum", c.optim.momentum);
    o("weight_decay", c.optim.weight_decay);
    o("beta1", c.optim.beta1);
    o("beta2", c.optim.beta2);
    o("eps", c.optim.eps);
    o("grad_clip", c.optim.grad_clip);
    o.finish();
  }
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
  {
    Reader s = r.object("loss_scale");
    s("init", c.loss_scale.init);
    s("window", c.loss_scale.window);
    s.finish();
  }
  {
    Reader s = r.object("dist");
    s("ddp", c.dist.ddp);
    s("bucket_mb", c.dist.bucket_mb);
    s("first_bucket_mb", c.dist.first_bucket_mb);
    s("compress", c.dist.compress);
    s("local_sgd", c.dist.local_sgd);
    s("algorithm", c.dist.algorithm);
    s("transport", c.dist.transport);
    s("backend", c.dist.backend);
    s("timeout_ms", c.dist.timeout_ms);
    s("straggler", c.dist.straggler);
    s.finish();
  }
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
