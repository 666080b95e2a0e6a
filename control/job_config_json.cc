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
  // The nested object `key`, read by `fields` and checked whole.
  template <typename Fields>
  void object(const char* key, Fields&& fields) {
    seen_.insert(key);
    static const json kEmpty = json::object();
    auto it = j_.find(key);
    Reader nested(it == j_.end() ? kEmpty : *it, path_ + key + ".");
    fields(nested);
    nested.finish();
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

// Writes fields as the keys of one JSON object, nested as the reader reads them.
class Writer {
 public:
  template <typename T>
  void operator()(const char* key, const T& value) {
    j_[key] = value;
  }
  template <typename Fields>
  void object(const char* key, Fields&& fields) {
    Writer nested;
    fields(nested);
    j_[key] = std::move(nested.j_);
  }
  json take() { return std::move(j_); }

 private:
  json j_ = json::object();
};

// Every field of the config, named once: the writer and the reader walk the
// same lists (C is const for writing), so the two can never disagree.
template <typename V, typename C>
void model_fields(V& v, C& m) {
  v("kind", m.kind);
  v("width", m.width);
  v("depth", m.depth);
  v("classes", m.classes);
  v("channels", m.channels);
  v("hidden", m.hidden);
  v("layers", m.layers);
  v("heads", m.heads);
  v("embd", m.embd);
  v("block", m.block);
  v("dropout", m.dropout);
  v("seed", m.seed);
}

template <typename V, typename C>
void data_fields(V& v, C& d) {
  v("spec", d.spec);
  v("synthetic_size", d.synthetic_size);
  v("synthetic_test_size", d.synthetic_test_size);
  v("input_dim", d.input_dim);
  v("classes", d.classes);
  v("target_dim", d.target_dim);
  v("noise", d.noise);
  v("block", d.block);
  v("seed", d.seed);
}

template <typename V, typename C>
void optim_fields(V& v, C& o) {
  v("name", o.name);
  v("lr", o.lr);
  v("momentum", o.momentum);
  v("weight_decay", o.weight_decay);
  v("beta1", o.beta1);
  v("beta2", o.beta2);
  v("eps", o.eps);
  v("grad_clip", o.grad_clip);
}

template <typename V, typename C>
void dist_fields(V& v, C& s) {
  v("ddp", s.ddp);
  v("bucket_mb", s.bucket_mb);
  v("first_bucket_mb", s.first_bucket_mb);
  v("compress", s.compress);
  v("local_sgd", s.local_sgd);
  v("algorithm", s.algorithm);
  v("transport", s.transport);
  v("backend", s.backend);
  v("timeout_ms", s.timeout_ms);
  v("check_replicas_every", s.check_replicas_every);
  v("straggler", s.straggler);
}

template <typename V, typename C>
void config_fields(V& v, C& c) {
  v.object("model", [&](V& r) { model_fields(r, c.model); });
  v("loss", c.loss);
  v.object("data", [&](V& r) { data_fields(r, c.data); });
  v("batch", c.batch);
  v("steps", c.steps);
  v("epochs", c.epochs);
  v.object("optim", [&](V& r) { optim_fields(r, c.optim); });
  v("warmup_steps", c.warmup_steps);
  v("lr_min", c.lr_min);
  v("accumulate", c.accumulate);
  v("last_batch", c.last_batch);
  v("seed", c.seed);
  v("device", c.device);
  v("run_dir", c.run_dir);
  v("init_from", c.init_from);
  v("resume", c.resume);
  v("checkpoint_every", c.checkpoint_every);
  v("keep_checkpoints", c.keep_checkpoints);
  v("resume_latest", c.resume_latest);
  v("from_peers", c.from_peers);
  v("stop_after_step", c.stop_after_step);
  v("min_nproc", c.min_nproc);
  v("on_failure", c.on_failure);
  v("threads", c.threads);
  v("log_every", c.log_every);
  v("eval", c.eval);
  v("allow_nonfinite_loss", c.allow_nonfinite_loss);
  v("precision", c.precision);
  v.object("loss_scale", [&](V& r) {
    r("init", c.loss_scale.init);
    r("window", c.loss_scale.window);
  });
  v.object("dist", [&](V& r) { dist_fields(r, c.dist); });
}

}  // namespace

json job_config_to_json(const train::TrainConfig& c) {
  Writer w;
  config_fields(w, c);
  return w.take();
}

train::TrainConfig job_config_from_json(const json& j) {
  train::TrainConfig c;
  Reader r(j, "");
  config_fields(r, c);
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
