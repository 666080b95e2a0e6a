#include "core/perf/step_metrics.h"

#include <algorithm>
#include <cmath>

#include "core/common/check.h"
#include "core/common/json_number.h"

namespace mddp::perf {

double overlap_fraction(double exposed_ms, double total_ms) {
  if (total_ms <= 0) return 0;
  return std::clamp(1.0 - exposed_ms / total_ms, 0.0, 1.0);
}

bool traced_step(int64_t step, int world_size) {
  return step % kStepTraceEvery == 0 && world_size <= kStepTraceMaxRanks;
}

double StepMetrics::overlap() const {
  return overlap_fraction(exposed_comm_ms, total_comm_ms);
}

double StepMetrics::samples_per_s() const {
  return step_ms > 0 ? static_cast<double>(samples) * 1e3 / step_ms : 0;
}

double StepMetrics::tokens_per_s() const {
  return step_ms > 0 ? static_cast<double>(tokens) * 1e3 / step_ms : 0;
}

double StepMetrics::compression_ratio() const {
  return comm_bytes > 0 ? static_cast<double>(grad_bytes) / static_cast<double>(comm_bytes) : 0;
}

namespace {

// Times are measured in whole nanoseconds: printing more digits of their
// millisecond form only repeats floating-point noise (0.72419099999999991).
double ns_precision(double ms) {
  return std::round(ms * 1e6) / 1e6;
}

// The compact form of step_metrics.h: one array per step, times after the bucket's start.
nlohmann::json steps_json(const comm::CommSpan& b) {
  nlohmann::json out = nlohmann::json::array();
  for (const comm::AlgoStep& s : b.steps)
    out.push_back({comm::phase_name(s), s.index, s.send_peer, s.send_block, s.recv_peer,
                   s.recv_block, s.send_bytes, s.recv_bytes, s.start_ns - b.start_ns,
                   s.end_ns - b.start_ns});
  return out;
}

}  // namespace

nlohmann::json StepMetrics::to_json() const {
  if (eval) {
    nlohmann::json j = {{"kind", "eval"},
                        {"rank", rank},
                        {"step", step},
                        {"eval_loss", eval_loss},
                        {"eval_accuracy", eval_accuracy}};
    if (!eval_sample.empty()) j["eval_sample"] = eval_sample;
    return j;
  }
  nlohmann::json spans = nlohmann::json::array();
  for (const auto& b : buckets) {
    nlohmann::json span = {{"index", b.index},           {"bytes", b.bytes},
                           {"ready_ns", b.ready_ns},     {"launch_ns", b.launch_ns},
                           {"start_ns", b.start_ns},     {"end_ns", b.end_ns},
                           {"grad_bytes", b.grad_bytes}, {"sent_bytes", b.sent_bytes}};
    if (b.op != comm::SpanOp::kAllReduce) span["op"] = comm::to_string(b.op);
    if (b.round != 0) span["round"] = b.round;
    if (!b.steps.empty()) span["steps"] = steps_json(b);
    spans.push_back(std::move(span));
  }
  nlohmann::json j = {{"kind", "step"},
                      {"rank", rank},
                      {"step", step},
                      {"loss", static_cast<float>(loss)},
                      {"data_ms", ns_precision(data_ms)},
                      {"forward_ms", ns_precision(forward_ms)},
                      {"backward_ms", ns_precision(backward_ms)},
                      {"exposed_comm_ms", ns_precision(exposed_comm_ms)},
                      {"total_comm_ms", ns_precision(total_comm_ms)},
                      {"optimizer_ms", ns_precision(optimizer_ms)},
                      {"step_ms", ns_precision(step_ms)},
                      {"overlap", ns_precision(overlap())},
                      {"comm_bytes", comm_bytes},
                      {"grad_bytes", grad_bytes},
                      {"sent_bytes", sent_bytes},
                      {"start_ns", start_ns},
                      {"clock_offset_ns", clock_offset_ns},
                      {"buckets", spans}};
  if (samples > 0) {  // records from before these fields stay as they were
    j["samples"] = samples;
    j["samples_per_s"] = ns_precision(samples_per_s());
  }
  if (tokens > 0) {
    j["tokens"] = tokens;
    j["tokens_per_s"] = ns_precision(tokens_per_s());
  }
  return j;
}

namespace {

// j[key] into `out` when present; a value of the wrong type, or a number
// out of the field's range, names the key.
template <typename T>
void read(const nlohmann::json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  const std::optional<T> v = json_number<T>(*it);
  if (!v)
    throw InputError(str("metrics record: '", key, "' should be ",
                         std::is_integral_v<T> ? "an integer in range" : "a number", ", not ",
                         it->dump()));
  out = *v;
}

std::vector<comm::AlgoStep> steps_from_json(const nlohmann::json& j, int64_t bucket_start_ns) {
  const auto bad = [&](const nlohmann::json& v) {
    return InputError(
        str("metrics record: a bucket step should be [phase, index, send_peer, send_block, "
            "recv_peer, recv_block, send_bytes, recv_bytes, start, end], not ",
            v.dump()));
  };
  if (!j.is_array()) throw bad(j);
  std::vector<comm::AlgoStep> out;
  for (const auto& v : j) {
    if (!v.is_array() || v.size() != 10 || !v[0].is_string()) throw bad(v);
    for (std::size_t k = 1; k < 10; ++k)
      if (!v[k].is_number_integer()) throw bad(v);
    comm::AlgoStep s;
    comm::parse_phase_name(v[0].get<std::string>(), s);
    s.index = v[1].get<int>();
    s.send_peer = v[2].get<int>();
    s.send_block = v[3].get<int>();
    s.recv_peer = v[4].get<int>();
    s.recv_block = v[5].get<int>();
    s.send_bytes = v[6].get<int64_t>();
    s.recv_bytes = v[7].get<int64_t>();
    s.start_ns = bucket_start_ns + v[8].get<int64_t>();
    s.end_ns = bucket_start_ns + v[9].get<int64_t>();
    out.push_back(s);
  }
  return out;
}

}  // namespace

StepMetrics StepMetrics::from_json(const nlohmann::json& j) {
  if (!j.is_object())
    throw InputError(str("metrics record: expected a JSON object, not ", j.dump()));
  StepMetrics m;
  std::string kind = "step";
  if (j.contains("kind")) {
    if (!j["kind"].is_string())
      throw InputError(str("metrics record: 'kind' should be \"step\" or \"eval\""));
    kind = j["kind"].get<std::string>();
    if (kind != "step" && kind != "eval")
      throw InputError(str("metrics record: unknown kind '", kind, "'"));
  }
  m.eval = kind == "eval";
  read(j, "rank", m.rank);
  read(j, "step", m.step);
  read(j, "loss", m.loss);
  read(j, "data_ms", m.data_ms);
  read(j, "forward_ms", m.forward_ms);
  read(j, "backward_ms", m.backward_ms);
  read(j, "exposed_comm_ms", m.exposed_comm_ms);
  read(j, "total_comm_ms", m.total_comm_ms);
  read(j, "optimizer_ms", m.optimizer_ms);
  read(j, "step_ms", m.step_ms);
  read(j, "comm_bytes", m.comm_bytes);
  read(j, "grad_bytes", m.grad_bytes);
  read(j, "sent_bytes", m.sent_bytes);
  read(j, "samples", m.samples);
  read(j, "tokens", m.tokens);
  read(j, "start_ns", m.start_ns);
  read(j, "clock_offset_ns", m.clock_offset_ns);
  read(j, "eval_loss", m.eval_loss);
  read(j, "eval_accuracy", m.eval_accuracy);
  if (const auto it = j.find("eval_sample"); it != j.end()) {
    if (!it->is_string())
      throw InputError(str("metrics record: 'eval_sample' should be a string, not ", it->dump()));
    m.eval_sample = it->get<std::string>();
  }
  if (const auto it = j.find("buckets"); it != j.end()) {
    if (!it->is_array()) throw InputError(str("metrics record: 'buckets' should be an array"));
    for (const auto& b : *it) {
      if (!b.is_object())
        throw InputError(str("metrics record: a bucket should be an object, not ", b.dump()));
      comm::CommSpan s;
      read(b, "index", s.index);
      read(b, "bytes", s.bytes);
      read(b, "ready_ns", s.ready_ns);
      read(b, "launch_ns", s.launch_ns);
      read(b, "start_ns", s.start_ns);
      read(b, "end_ns", s.end_ns);
      read(b, "grad_bytes", s.grad_bytes);
      read(b, "sent_bytes", s.sent_bytes);
      read(b, "round", s.round);
      if (const auto op = b.find("op"); op != b.end()) {
        if (!op->is_string())
          throw InputError(
              str("metrics record: a bucket's 'op' should be a string, not ", op->dump()));
        s.op = comm::parse_span_op(op->get<std::string>());
      }
      if (const auto steps = b.find("steps"); steps != b.end())
        s.steps = steps_from_json(*steps, s.start_ns);
      m.buckets.push_back(s);
    }
  }
  return m;
}

}  // namespace mddp::perf
