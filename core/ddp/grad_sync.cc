#include "core/ddp/grad_sync.h"

#include "core/common/check.h"
#include "core/ddp/strategies.h"

namespace mddp::ddp {

Mode parse_mode(const std::string& s) {
  if (s == "naive") return Mode::kNaive;
  if (s == "hooked") return Mode::kHooked;
  if (s == "bucketed") return Mode::kBucketed;
  throw InputError("unknown --ddp mode '" + s + "' (use naive, hooked or bucketed)");
}

Compression parse_compression(const std::string& s) {
  if (s == "none") return Compression::kNone;
  if (s == "fp16") return Compression::kFp16;
  if (s == "bf16") return Compression::kBf16;
  throw InputError("unknown --compress '" + s + "' (use none, fp16 or bf16)");
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::kNaive: return "naive";
    case Mode::kHooked: return "hooked";
    case Mode::kBucketed: return "bucketed";
  }
  return "?";
}

const char* to_string(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kFp16: return "fp16";
    case Compression::kBf16: return "bf16";
  }
  return "?";
}

std::unique_ptr<GradSync> make_grad_sync(const SyncOptions& options, std::vector<nn::Parameter*> params,
                                         comm::ProcessGroup& comm) {
  switch (options.mode) {
    case Mode::kNaive: return std::make_unique<NaiveSync>(std::move(params), options.compress, comm);
    case Mode::kHooked: return std::make_unique<HookedSync>(std::move(params), options.compress, comm);
    case Mode::kBucketed: return make_bucketed_sync(options, std::move(params), comm, BucketRules{});
  }
  return nullptr;
}

std::unique_ptr<GradSync> make_bucketed_sync(const SyncOptions& options, std::vector<nn::Parameter*> params,
                                             comm::ProcessGroup& comm, BucketRules rules) {
  return std::make_unique<Reducer>(std::move(params), options, comm, rules);
}

}  // namespace mddp::ddp
