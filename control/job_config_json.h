// The job config as JSON: what the coordinator hands every worker at Join
// (JoinReply.job_config_json), so all ranks train with the coordinator's
// flags. Every field of train::TrainConfig, nested as in the struct:
//   {"model": {"kind": "mlp", "width": 256, ...}, "loss": "xent",
//    "data": {"spec": "fashion-mnist", ...}, "batch": 64, ...,
//    "optim": {"name": "adam", "lr": 0.001, ...}, "dist": {"ddp": "bucketed", ...}}
// Reading is strict: an unknown key or a value of the wrong type is an
// InputError naming the key; a missing key keeps its default.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/train/config.h"

namespace mddp::control {

nlohmann::json job_config_to_json(const train::TrainConfig& cfg);
train::TrainConfig job_config_from_json(const nlohmann::json& j);

// The same, as text (what travels in the JoinReply).
std::string dump_job_config(const train::TrainConfig& cfg);
train::TrainConfig parse_job_config(const std::string& text);

}  // namespace mddp::control
