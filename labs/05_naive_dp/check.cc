// Lab 5's checker: the student's GradSync after two backwards, at every
// world size and over both transports, against one process on the whole
// batch; then its speed next to core's naive and hooked strategies.
#include "labs/checks.h"
#include "labs/support/sync_check.h"

namespace mddp::labs {

void check_naive_dp(const Implementations& impl, const CheckOptions& o, Report& report) {
  const SyncFactory make = impl.naive_dp;
  if (!check_dp_groups(o, report, [&](DpRank& r) { grad_sync_cases(r, "naive DP", make); })) return;
  sync_speed({{"yours", make},
              {"reference (naive)", core_sync(ddp::Mode::kNaive)},
              {"hooked (Lab 6)", core_sync(ddp::Mode::kHooked)}},
             o, report);
}

}  // namespace mddp::labs
