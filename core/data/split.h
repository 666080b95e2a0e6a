// Which half of a dataset: the samples we train on, or the held-out ones.
#pragma once

#include <string>

namespace mddp::data {

enum class Split { kTrain, kTest };

inline std::string split_name(Split split) {
  return split == Split::kTrain ? "train" : "test";
}

}  // namespace mddp::data
