// Lab 8's checker, on real processes at every world size and over both
// transports. The ranks build their models from different seeds (as a rank
// started with another seed would), so:
//  1. after construction every rank must hold rank 0's parameters (the
//     initial broadcast);
//  2. one synchronised step must leave the whole batch's gradients;
//  3. accumulating 3 micro-batches must communicate only in the last one
//     (no_sync) and leave the sum of the 3 whole micro-batches' gradients.
#include "labs/checks.h"
#include "labs/support/dp_check.h"
#include "labs/support/dp_fixture.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

constexpr uint64_t kSeedOfRank0 = 100;  // rank r builds its model from seed 100 + r

CaseResult same_as_rank0(nn::Module& model, const Grads& rank0, const Grads& mine, int rank) {
  const Grads now = values_of(model);
  for (std::size_t p = 0; p < now.size(); ++p)
    for (std::size_t k = 0; k < now[p].size(); ++k) {
      if (now[p][k] == rank0[p][k]) continue;
      CaseResult r{.message = str("rank ", rank, ", ", param_name(model, p), " element ", k,
                                  " after construction: expected rank 0's ", show(rank0[p][k]),
                                  ", got ", show(now[p][k]))};
      if (now == mine)
        r.details.push_back(
            "every parameter is still this rank's own: the initial broadcast is missing — every "
            "replica must start from rank 0's parameters (broadcast them in the constructor)");
      return r;
    }
  return CaseResult::ok();
}

void ddp_cases(DpRank& r, const DdpFactory make) {
  auto model = dp_model(kSeedOfRank0 + r.rank());
  const Grads mine = values_of(*model);
  const Grads rank0 = values_of(*dp_model(kSeedOfRank0));
  // Small caps: several buckets over the six parameters.
  const ddp::SyncOptions sync{.mode = ddp::Mode::kBucketed,
                              .bucket_mb = 200.0 / (1 << 20),
                              .first_bucket_mb = 100.0 / (1 << 20)};
  WatchedGroup& g = r.group();
  std::unique_ptr<ddp::DataParallel> wrapper;
  if (!r.run("construction", [&] {
        g.set_phase("construction");
        wrapper = make(*model, g, sync);
        g.set_phase("");
        return same_as_rank0(*model, rank0, mine, r.rank());
      }))
    return;
  if (!r.run("one step", [&] {
        model->zero_grad();
        wrapper->before_backward(true);
        backward_shard(*model, r.rank(), r.world());
        wrapper->after_backward();
        return compare_grads(*model, whole_batch_grads(r.world(), {0}, &rank0),
                             shard_grads(r.rank(), r.world(), {0}, &rank0), r.world(),
                             str("rank ", r.rank()));
      }))
    return;
  r.run("no_sync over 3 micro-batches", [&] {
    model->zero_grad();
    g.clear();
    for (int k = 1; k <= 3; ++k) {
      g.set_phase(str("micro-batch ", k));
      wrapper->before_backward(k == 3);
      backward_shard(*model, r.rank(), r.world(), static_cast<uint64_t>(k));
      wrapper->after_backward();
    }
    g.set_phase("");
    for (int k = 1; k <= 2; ++k)
      if (const int64_t n = g.issued_in(str("micro-batch ", k)); n > 0)
        return CaseResult{
            .message =
                str("rank ", r.rank(), " issued ", n, " collective(s) during micro-batch ", k,
                    " of 3: with gradient accumulation only the last micro-batch's backward "
                    "synchronises (no_sync: before_backward(false) turns the hook off)")};
    return compare_grads(*model, whole_batch_grads(r.world(), {1, 2, 3}, &rank0),
                         shard_grads(r.rank(), r.world(), {1, 2, 3}, &rank0), r.world(),
                         str("rank ", r.rank()));
  });
}

}  // namespace

void check_ddp(const Implementations& impl, const CheckOptions& o, Report& report) {
  const DdpFactory make = impl.ddp;
  if (check_dp_groups(o, report, [&](DpRank& r) { ddp_cases(r, make); }))
    report.note("(no speed comparison: the wrapper's communication is Lab 5-7's strategies)");
}

}  // namespace mddp::labs
