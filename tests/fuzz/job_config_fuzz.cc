// The job config JSON (control/job_config_json.h), which every worker
// reads from the coordinator's JoinReply: strict parsing, then the same
// validation the coordinator applies. What parses must survive a round trip
// (dump, parse, dump gives the same text).
#include "control/job_config_json.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::refusals_allowed([&] {
    const train::TrainConfig cfg = control::parse_job_config(text);
    const std::string dumped = control::dump_job_config(cfg);
    MDDP_FUZZ_ASSERT(control::dump_job_config(control::parse_job_config(dumped)) == dumped);
    cfg.validate();
  });
  return 0;
}
