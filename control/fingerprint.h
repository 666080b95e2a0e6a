// A rank's fingerprint: what it built (model, parameters in registration
// order, bucket plan, wire type, version), sent in Validate; every rank must
// build the same, or DDP silently averages unrelated numbers.
// fingerprint_diff() says how one differs from another rank's, as one line:
//   "parameter 1 '0.bias': shape [128] here vs [256] on rank 0; ..."
// The coordinator's check of all of them is coordinator/fingerprint_check.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mddp::control {

struct Fingerprint {
  struct Parameter {
    std::string name;
    std::vector<int64_t> shape;
  };
  std::string model;                          // Module::describe()
  std::vector<Parameter> parameters;          // registration order
  std::vector<std::vector<int64_t>> buckets;  // parameter indices per bucket
  std::string dtype;                          // fp32 | fp16 | bf16
  std::string version;                        // microddp version
};

// The differences of `mine` from `theirs` (the fingerprint of `there`, as
// "rank 0"), "" when equal: at most `max_items` items separated by "; ",
// then "(and K more)".
std::string fingerprint_diff(const Fingerprint& mine, const Fingerprint& theirs,
                             const std::string& there = "rank 0", std::size_t max_items = 6);

}  // namespace mddp::control
