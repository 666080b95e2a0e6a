// Lab 6's checker: the student's GradSync must launch every parameter's
// all-reduce from the grad-ready hook, during backward, without waiting
// there, and leave the whole batch's gradients after finish(); then its
// speed next to core's hooked strategy and the naive one it improves on.
#include "labs/checks.h"
#include "labs/support/sync_check.h"

namespace mddp::labs {
namespace {

CaseResult launched_from_hooks(const WatchedGroup& g, std::size_t params) {
  const int64_t during = g.issued_in("backward");
  if (during == 0)
    return {
        .message =
            "no all-reduce was launched during backward: on_grad_ready must start each parameter's "
            "all-reduce as its gradient becomes ready (launching them all in finish() is naive "
            "DP)"};
  if (during != static_cast<int64_t>(params))
    return {.message = str(during, " all-reduces were launched during backward for ", params,
                           " parameters: launch exactly one per parameter, from its hook")};
  if (g.waited_in("backward") > 0)
    return {.message =
                "an all-reduce was waited for inside on_grad_ready: backward then stalls at every "
                "parameter "
                "until its all-reduce is done, and nothing overlaps. Keep the Work and wait in "
                "finish()"};
  return CaseResult::ok();
}

}  // namespace

void check_hooks(const Implementations& impl, const CheckOptions& o, Report& report) {
  const SyncFactory make = impl.hooks;
  if (!check_dp_groups(o, report, [&](DpRank& r) {
        grad_sync_cases(r, "hooked DP", make, launched_from_hooks);
      }))
    return;
  sync_speed({{"yours", make},
              {"reference (hooked)", core_sync(ddp::Mode::kHooked)},
              {"naive (Lab 5)", core_sync(ddp::Mode::kNaive)}},
             o, report);
}

}  // namespace mddp::labs
