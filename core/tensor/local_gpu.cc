#include "core/tensor/local_gpu.h"

#include <charconv>
#include <optional>

#include "core/common/check.h"

namespace mddp::tensor {
namespace {

// The local rank and the variable it came from (torchrun's first, then SLURM's).
std::optional<std::pair<int, std::string>> local_rank(const EnvLookup& env) {
  for (const char* var : {"LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* text = env(var);
    if (!text) continue;
    const std::string s(text);
    int value = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value < 0)
      throw InputError(
          str(var, "='", s,
              "' is not a local rank (a non-negative integer); it picks this process's GPU "
              "under --device cuda"));
    return std::make_pair(value, std::string(var));
  }
  return std::nullopt;
}

// How many GPUs CUDA_VISIBLE_DEVICES lists (comma-separated indices or UUIDs); -1 when unset.
int visible_count(const EnvLookup& env) {
  const char* text = env("CUDA_VISIBLE_DEVICES");
  if (!text) return -1;
  const std::string s(text);
  if (s.empty()) return 0;
  int n = 1;
  for (char c : s) n += c == ',';
  return n;
}

}  // namespace

LocalGpu local_gpu(const EnvLookup& env) {
  const auto rank = local_rank(env);
  const int visible = visible_count(env);
  if (visible == 1)  // one GPU per process or container: it is cuda:0 here
    return {0, str("CUDA_VISIBLE_DEVICES=", env("CUDA_VISIBLE_DEVICES"),
                   " (one GPU for this process)")};
  if (!rank) return {0, "no LOCAL_RANK or SLURM_LOCALID: the first GPU"};
  const auto [r, var] = *rank;
  if (visible > 1 && r >= visible)
    throw InputError(str(var, "=", r, " but CUDA_VISIBLE_DEVICES=", env("CUDA_VISIBLE_DEVICES"),
                         " shows only ", visible, " GPU(s) to this process: start at most ",
                         visible, " rank(s) on this host, or give each rank its own GPU"));
  return {r, str(var, "=", r)};
}

}  // namespace mddp::tensor
