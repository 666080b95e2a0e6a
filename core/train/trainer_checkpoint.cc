// Trainer's side of checkpoints: what goes into the pair, and taking it back.
#include <map>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/train/checkpoint_meta.h"
#include "core/train/trainer.h"

namespace mddp::train {

CheckpointContents Trainer::checkpoint_contents() {
  CheckpointContents c;
  c.step = steps_done_;
  for (nn::Parameter* p : model_->parameters()) c.weights.push_back({p->name, p->value});
  for (auto& [name, t] : optimizer_->state()) c.state.push_back({name, t});
  c.model_metadata = {{"model", model_json(*model_, train_set_->sample_shape(), cfg_.loss)},
                      {"input", input_json(*train_set_)},
                      {"dataset", dataset_json(cfg_.data.spec, *train_set_)}};
  c.state_metadata = state_metadata(
      cfg_, world_size_, {steps_done_, steps_per_epoch(), train_set_->size(), optimizer_->steps()});
  if (scaler_.enabled())
    c.state_metadata["loss_scaler"] = scaler_.state_json();  // resume stays bitwise
  return c;
}

void Trainer::save_checkpoint(const std::string& path) {
  write_checkpoint(path, checkpoint_contents());
}

void Trainer::load_weights(const std::string& path) {
  const Safetensors file = load_safetensors(path);
  const std::string what = str("--init-from '", path, "'");
  check_vocabulary(file, *train_set_, what);
  copy_model_weights(*model_, file, what);
}

void Trainer::restore(const Checkpoint& c) {
  const std::string what = str("cannot resume from '", c.path, "'");
  check_vocabulary(c.model, *train_set_, what);  // the same --dataset may hold other text now
  copy_model_weights(*model_, c.model, what);
  copy_tensors_by_name(optimizer_->state(), c.state,
                       str("cannot resume from '", c.state_path, "'"));
  const auto it = c.state.metadata.find("optimizer");
  const auto opt =
      nlohmann::json::parse(it == c.state.metadata.end() ? "" : it->second, nullptr, false);
  if (!opt.is_object() || !opt.contains("step") || !opt["step"].is_number_integer())
    throw InputError(
        str("cannot resume from '", c.state_path, "': no optimiser step in its metadata"));
  optimizer_->set_steps(opt["step"].get<int64_t>());
  if (scaler_.enabled()) {  // the fingerprint matched: the checkpoint is fp16 too
    const auto scaler = c.state.metadata.find("loss_scaler");
    if (scaler == c.state.metadata.end())
      throw InputError(str("cannot resume from '", c.state_path,
                           "': an fp16 checkpoint without its loss scale"));
    scaler_.restore(scaler->second, str("cannot resume from '", c.state_path, "'"));
  }
  steps_done_ = c.step;
  resumed_world_size_ = checkpoint_world_size(c);
}

}  // namespace mddp::train
