// What the Labs that write a ddp::GradSync (naive DP, hooks) and the
// bucketing Lab (the Reducer with a student's rules) share: the gradient
// cases on every group, and the speed of the strategies side by side.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ddp/grad_sync.h"
#include "labs/support/dp_check.h"

namespace mddp::labs {

using MakeSync =
    std::function<std::unique_ptr<ddp::GradSync>(std::vector<nn::Parameter*>, comm::ProcessGroup&)>;

// Two backwards (zero_grad between) of the small model with the strategy
// `make` builds, wired to the grad-ready hook; after each finish() the
// gradients must be the whole batch's. `structure` (optional) checks how
// the collectives were issued (WatchedGroup phases "backward", "finish");
// it returns an empty result when fine. Stops at the first failure.
void grad_sync_cases(
    DpRank& r, const std::string& what, const MakeSync& make,
    const std::function<CaseResult(const WatchedGroup&, std::size_t params)>& structure = {});

// core/ddp's strategy `mode` (the references), with the default options.
MakeSync core_sync(ddp::Mode mode);

struct SyncContender {
  std::string name;
  MakeSync make;
};
// Times a training step's backward and synchronisation with each contender
// on a larger model (FullMLP(256, 4)), interleaved, and reports the table.
void sync_speed(const std::vector<SyncContender>& contenders, const CheckOptions& o,
                Report& report);

}  // namespace mddp::labs
