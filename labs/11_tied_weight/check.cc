// Lab 11's checker, in two stages:
//  1. the real Reducer (core/ddp/reducer.cc) with the student's counting
//     rule, on real processes, on a GPT whose LM head is its token
//     embedding (support/gpt_fixture.h), with three bucket caps: every rank
//     watches when the tied weight's bucket is launched — after how many of
//     its two contributions — and then compares the averaged gradients with
//     one process on the whole batch;
//  2. the rule alone, against the counting Note [Contributions] describes,
//     under seeded random parameters used 1 to 3 times, buckets and orders
//     of contributions (the GPT has only uses 1 and 2, in one order).
// No speed comparison: the rule is a pair of decrements per hook.
#include <algorithm>

#include "core/common/rng.h"
#include "core/common/strings.h"
#include "core/ddp/bucket_assignment.h"
#include "core/ddp/strategies.h"
#include "labs/checks.h"
#include "labs/support/dp_check.h"
#include "labs/support/gpt_fixture.h"

namespace mddp::labs {
namespace {

// What the wrapped flush rule saw in this rank's current backward (a rank
// is a process: one watch each).
struct TiedLaunchWatch {
  std::size_t tied_bucket = 0;
  int contributions = 0;  // of the tied weight so far
  int at_launch = -1;     // contributions when its bucket was launched; -1: not launched
  std::vector<std::size_t> pending = {};  // the counts the flush rule last saw
};
TiedLaunchWatch g_tied_launch_watch;

std::size_t watching_flush(const std::vector<std::size_t>& pending, std::size_t next,
                           const std::function<void(std::size_t bucket)>& launch) {
  TiedLaunchWatch& w = g_tied_launch_watch;
  w.pending = pending;
  return ddp::flush_in_order(pending, next, [&](std::size_t b) {
    if (b == w.tied_bucket) w.at_launch = w.contributions;
    launch(b);
  });
}

// "" when the tied weight's bucket left after all its contributions and
// every bucket left; else what went wrong, as the student can fix it.
CaseResult tied_launch_problem(const std::string& where, std::size_t buckets, int uses) {
  const TiedLaunchWatch& w = g_tied_launch_watch;
  if (w.at_launch >= 0 && w.at_launch < uses)
    return {
        .message = str(where, ": the tied weight's bucket (bucket ", w.tied_bucket, " of ", buckets,
                       ") was launched after ", w.at_launch, " of its ", uses,
                       " contributions: its gradient misses the embedding lookup's "
                       "scatter-add, so the ranks averaged the head's share alone"),
        .details = {"transformer.wte.weight is used twice in forward (uses = 2): its hook fires "
                    "after the head's dW, first in backward, and again after the embedding's "
                    "scatter-add, last. Count its contributions down (uses_left) and count it off "
                    "its bucket (pending) only at the last (Note [Contributions])"}};
  for (std::size_t b = 0; b < w.pending.size(); ++b)
    if (w.pending[b] != 0)
      return {.message = str(where, ": after backward bucket ", b, " still waits (pending[", b,
                             "] = ", w.pending[b],
                             "): every parameter's last contribution must count it off its "
                             "bucket, so that each bucket reaches 0 exactly once")};
  return CaseResult::ok();
}

// Two backwards of the GPT with the Reducer and `rules`, bucket cap
// `cap_bytes`; false: stop (some rank failed).
bool tied_reducer_cases(DpRank& r, const ddp::BucketRules& rules, std::size_t cap_bytes) {
  auto model = tied_gpt();
  const auto params = model->parameters();
  const Grads want = gpt_whole_batch_grads(r.world());
  const Grads local = gpt_shard_grads(r.rank(), r.world());
  const double mb = static_cast<double>(cap_bytes) / (1 << 20);
  std::unique_ptr<ddp::GradSync> sync;
  std::size_t buckets = 0;
  bool ok = true;
  for (int pass = 1; pass <= 2 && ok; ++pass) {
    const std::string where = str("rank ", r.rank(), ", backward ", pass);
    ok = r.run(str("bucket cap ", cap_bytes, " bytes, backward ", pass, " of 2"), [&] {
      if (!sync) {
        sync = ddp::make_bucketed_sync({.bucket_mb = mb, .first_bucket_mb = mb}, params, r.group(),
                                       rules);
        const auto& assignment = dynamic_cast<ddp::Reducer&>(*sync).buckets();
        buckets = assignment.size();
        for (std::size_t b = 0; b < buckets; ++b)
          if (std::ranges::find(assignment[b], std::size_t{0}) != assignment[b].end())
            g_tied_launch_watch.tied_bucket = b;
        model->set_grad_ready_hook([&](nn::Parameter& p) {
          if (&p == params[0]) ++g_tied_launch_watch.contributions;
          sync->on_grad_ready(p);
        });
      }
      g_tied_launch_watch = {.tied_bucket = g_tied_launch_watch.tied_bucket};
      model->zero_grad();
      gpt_backward_shard(*model, r.rank(), r.world());
      CaseResult launch = tied_launch_problem(where, buckets, params[0]->uses);
      if (!launch.message.empty()) return launch;
      sync->finish();
      return compare_grads(*model, want, local, r.world(), str("rank ", r.rank()));
    });
  }
  model->set_grad_ready_hook({});
  return ok;
}

// One random setting of the rule alone: parameters used 1 to 3 times in
// contiguous buckets, contributions in a shuffled order.
struct RuleCase {
  std::vector<int> uses;
  std::vector<std::size_t> bucket_of;
  std::vector<std::size_t> order;  // parameter indices, each uses[i] times
};

RuleCase random_rule_case(Rng& rng) {
  RuleCase c;
  const std::size_t n = 1 + rng.below(10);
  std::size_t bucket = 0;
  for (std::size_t i = 0; i < n; ++i) {
    c.uses.push_back(1 + static_cast<int>(rng.below(3)));
    if (i > 0 && rng.below(3) == 0) ++bucket;
    c.bucket_of.push_back(bucket);
    for (int k = 0; k < c.uses.back(); ++k) c.order.push_back(i);
  }
  for (std::size_t i = c.order.size(); i-- > 1;) std::swap(c.order[i], c.order[rng.below(i + 1)]);
  return c;
}

// Drives `count` through c.order, next to the counting of Note
// [Contributions] done here, and names the first difference.
CaseResult rule_case(decltype(&ddp::count_contribution) count, const RuleCase& c) {
  std::vector<int> uses_left = c.uses, want_left = c.uses;
  std::vector<std::size_t> pending(c.bucket_of.back() + 1, 0);
  for (std::size_t b : c.bucket_of) ++pending[b];
  std::vector<std::size_t> want_pending = pending;
  for (std::size_t i : c.order) {
    const std::size_t b = c.bucket_of[i];
    const int k = c.uses[i] - want_left[i] + 1;  // this contribution's number
    const bool last = --want_left[i] == 0;
    const bool want_done = last && --want_pending[b] == 0;
    const bool done = count(uses_left, pending, i, b);
    const std::string what = str("parameter ", i, " (used ", c.uses[i], " times, in bucket ", b,
                                 "), its contribution ", k, " of ", c.uses[i], ": ");
    if (uses_left != want_left)
      return {.message = str(what, "uses_left[", i, "] is ", uses_left[i], ", expected ",
                             want_left[i], " (count each contribution off once)")};
    if (pending != want_pending)
      return {.message =
                  str(what, "pending[", b, "] is ", pending[b], ", expected ", want_pending[b],
                      last ? " (its last contribution makes it final: count it off its "
                             "bucket)"
                           : " (it is final only at its last contribution: the bucket "
                             "must wait)")};
    if (done != want_done)
      return {.message = str(what, "you returned ", done ? "true" : "false", ", expected ",
                             want_done ? "true" : "false",
                             " (true exactly when this contribution completed the bucket)")};
  }
  return CaseResult::ok();
}

void check_contribution_rule(decltype(&ddp::count_contribution) count, Report& report) {
  Rng rng(13);
  int cases = 0;
  for (; cases < 40; ++cases) {
    const RuleCase c = random_rule_case(rng);
    const auto [problem, result] = run_guarded([&] { return rule_case(count, c); });
    if (problem != Problem::kNone) {
      report.fail(str("count_contribution: ", result.message), result.details);
      return;
    }
  }
  report.passed("count_contribution: parameters used 1 to 3 times, shuffled contributions", cases);
}

}  // namespace

void check_tied_weight(const Implementations& impl, const CheckOptions& o, Report& report) {
  const ddp::BucketRules rules{ddp::assign_buckets, watching_flush, impl.tied_weight};
  // One bucket for all; the tied weight sharing its bucket; one bucket each.
  const bool ok = check_dp_groups(o, report, [&](DpRank& r) {
    for (std::size_t cap : {std::size_t{1} << 20, std::size_t{600}, std::size_t{1}})
      if (!tied_reducer_cases(r, rules, cap)) return;
  });
  if (ok) check_contribution_rule(impl.tied_weight, report);
}

}  // namespace mddp::labs
