#include "core/train/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::train {
namespace {

bool all_finite(const tensor::Tensor& t) {
  const auto finite = [](float v) { return std::isfinite(v); };
  if (t.device().is_cuda()) {  // one host wait per tensor: fp16 on a GPU checks through the host
    const std::vector<float> v = t.to_vector();
    return std::all_of(v.begin(), v.end(), finite);
  }
  return std::all_of(t.data(), t.data() + t.numel(), finite);
}

}  // namespace

LossScaler::LossScaler(bool enabled, LossScaleConfig cfg)
    : enabled_(enabled), cfg_(cfg), scale_(cfg.init) {
  MDDP_CHECK(!enabled || (std::isfinite(cfg.init) && cfg.init > 0 && cfg.window >= 1),
             "bad loss-scale config");
}

bool LossScaler::unscale(const std::vector<nn::Parameter*>& params, float factor) {
  if (!enabled_) {
    if (factor != 1.0f)
      for (nn::Parameter* p : params) tensor::scale(p->grad, factor);
    return true;
  }
  const bool finite = std::all_of(params.begin(), params.end(),
                                  [](nn::Parameter* p) { return all_finite(p->grad); });
  if (!finite) {
    scale_ *= cfg_.backoff;
    good_steps_ = 0;
    ++skipped_;
    return false;
  }
  for (nn::Parameter* p : params) tensor::scale(p->grad, factor / scale_);
  if (++good_steps_ >= cfg_.window) {
    if (std::isfinite(scale_ * cfg_.growth)) scale_ *= cfg_.growth;
    good_steps_ = 0;
  }
  return true;
}

std::string LossScaler::state_json() const {
  return nlohmann::json{{"scale", scale_}, {"good_steps", good_steps_}, {"skipped", skipped_}}
      .dump();
}

void LossScaler::restore(const std::string& text, const std::string& what) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("scale") || !j["scale"].is_number() ||
      !j.contains("good_steps") || !j["good_steps"].is_number_integer() || !j.contains("skipped") ||
      !j["skipped"].is_number_integer())
    throw InputError(str(what, ": its 'loss_scaler' metadata is not {scale, good_steps, skipped}"));
  const float scale = j["scale"].get<float>();
  if (!(std::isfinite(scale) && scale > 0))
    throw InputError(str(what, ": its loss scale ", scale, " is not a positive number"));
  set_state(scale, j["good_steps"].get<int64_t>(), j["skipped"].get<int64_t>());
}

void LossScaler::set_state(float scale, int64_t good_steps, int64_t skipped) {
  scale_ = scale;
  good_steps_ = good_steps;
  skipped_ = skipped;
}

}  // namespace mddp::train
