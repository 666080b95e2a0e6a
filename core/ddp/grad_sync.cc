#include "core/ddp/grad_sync.h"

#include <algorithm>

#include "core/common/check.h"
#include "core/ddp/sharded_sync.h"
#include "core/ddp/strategies.h"

namespace mddp::ddp {

Mode parse_mode(const std::string& s) {
  if (s == "naive") return Mode::kNaive;
  if (s == "hooked") return Mode::kHooked;
  if (s == "bucketed") return Mode::kBucketed;
  if (s == "sharded") return Mode::kSharded;
  throw InputError("unknown --ddp mode '" + s + "' (use naive, hooked, bucketed or sharded)");
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::kNaive:
      return "naive";
    case Mode::kHooked:
      return "hooked";
    case Mode::kBucketed:
      return "bucketed";
    case Mode::kSharded:
      return "sharded";
  }
  return "?";
}

std::size_t bucket_cap_bytes(double mb, const char* flag) {
  if (!(mb > 0)) throw InputError(str(flag, " must be a positive number of MiB, got ", mb));
  constexpr double kMaxMb = 1024.0 * 1024.0;  // 1 TiB
  return static_cast<std::size_t>(std::min(mb, kMaxMb) * 1024 * 1024);
}

std::vector<std::unique_ptr<SyncUnit>> units_per_parameter(
    const std::vector<nn::Parameter*>& params, const Compression& compress) {
  std::vector<std::unique_ptr<SyncUnit>> units;
  for (std::size_t i = 0; i < params.size(); ++i)
    units.push_back(
        make_sync_unit(static_cast<int>(i), params[i]->grad, {params[i]->grad}, compress));
  return units;
}

std::unique_ptr<GradSync> make_grad_sync(const SyncOptions& options,
                                         std::vector<nn::Parameter*> params,
                                         comm::ProcessGroup& comm) {
  switch (options.mode) {
    case Mode::kNaive:
      return std::make_unique<NaiveSync>(std::move(params), options.compress, comm);
    case Mode::kHooked:
      return std::make_unique<HookedSync>(std::move(params), options.compress, comm);
    case Mode::kBucketed:
      return make_bucketed_sync(options, std::move(params), comm, BucketRules{});
    case Mode::kSharded:
      return std::make_unique<ShardedSync>(std::move(params), options, comm);
  }
  return nullptr;
}

std::unique_ptr<GradSync> make_bucketed_sync(const SyncOptions& options,
                                             std::vector<nn::Parameter*> params,
                                             comm::ProcessGroup& comm, BucketRules rules) {
  return std::make_unique<Reducer>(std::move(params), options, comm, rules);
}

}  // namespace mddp::ddp
