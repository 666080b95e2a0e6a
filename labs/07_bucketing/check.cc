// Lab 7's checker, in three stages:
//  1. assign_buckets against core's on hand-picked and seeded random sizes
//     (every parameter exactly once, in ready order, each bucket under its
//     cap);
//  2. flush_in_order driven through gradient-ready orders, the natural one
//     and shuffled ones (as when ranks' gradients become ready in different
//     orders): buckets must go strictly in index order, each as soon as it
//     and every bucket before it are complete;
//  3. the real Reducer (core/ddp/reducer.cc) with both rules, on real
//     processes, against one process on the whole batch.
// Then the comparison: unbucketed (hooked) against bucketed.
#include <algorithm>
#include <numeric>

#include "core/common/rng.h"
#include "core/common/strings.h"
#include "core/ddp/bucket_assignment.h"
#include "labs/checks.h"
#include "labs/support/sync_check.h"

namespace mddp::labs {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

struct AssignCase {
  std::vector<std::size_t> bytes;
  std::size_t first_cap, cap;
};

std::vector<AssignCase> assign_cases() {
  std::vector<AssignCase> c{
      {{}, 100, 100},                 // no parameters, no buckets
      {{40}, 100, 100},               // one
      {{40, 40, 40}, 100, 100},       // bucket 0 takes two, then one
      {{50, 50}, 100, 100},           // exactly at the cap still fits
      {{60, 60, 60}, 100, 200},       // a small first bucket, then a larger cap
      {{30, 500, 30, 30}, 100, 200},  // a parameter past the cap gets its own bucket
      {{80, 10, 10, 10}, 25, 1000},   // the first cap is smaller than most
  };
  Rng rng(11);
  for (int k = 0; k < 30; ++k) {
    AssignCase a;
    const auto n = 1 + rng.below(30);
    for (uint64_t i = 0; i < n; ++i) a.bytes.push_back(4 * (1 + rng.below(1024)));
    a.first_cap = 16 + rng.below(2048);
    a.cap = a.first_cap + rng.below(8192);
    c.push_back(a);
  }
  return c;
}

std::string list(const std::vector<std::size_t>& v) {
  return str("[", join(v, ", "), "]");
}

std::size_t bytes_of(const std::vector<std::size_t>& bucket,
                     const std::vector<std::size_t>& bytes) {
  std::size_t b = 0;
  for (std::size_t i : bucket) b += bytes[i];
  return b;
}

// "" when `got` is the assignment; else what is wrong with it.
CaseResult compare_assignment(const AssignCase& a, const Buckets& got) {
  const std::string where = str("sizes ", list(a.bytes), " (bytes), first_cap_bytes ", a.first_cap,
                                ", cap_bytes ", a.cap, ": ");
  std::vector<std::size_t> flat;
  for (const auto& b : got) flat.insert(flat.end(), b.begin(), b.end());
  std::vector<std::size_t> ready_order(a.bytes.size());
  std::iota(ready_order.rbegin(), ready_order.rend(), 0);  // last parameter first
  if (flat != ready_order) {
    std::vector<std::size_t> sorted = flat;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::size_t> each(a.bytes.size());
    std::iota(each.begin(), each.end(), 0);
    if (sorted != each) {
      std::string all;
      for (const auto& b : got) all += list(b);
      return {.message =
                  str(where, "your buckets ", all, " do not hold every parameter exactly once")};
    }
    return {.message = str(
                where, "your buckets list the parameters in the order ", list(flat),
                "; they must follow the order gradients become ready, the last parameter first: ",
                list(ready_order))};
  }
  const Buckets want = ddp::assign_buckets(a.bytes, a.first_cap, a.cap);
  for (std::size_t k = 0; k < std::max(got.size(), want.size()); ++k) {
    if (k < got.size() && k < want.size() && got[k] == want[k]) continue;
    if (k >= want.size() || k >= got.size())
      return {.message = str(where, "you made ", got.size(), " buckets, expected ", want.size())};
    const std::size_t cap = k == 0 ? a.first_cap : a.cap;
    CaseResult r{.message = str(where, "your bucket ", k, " is parameters ", list(got[k]), " (",
                                bytes_of(got[k], a.bytes), " bytes); expected ", list(want[k]),
                                " (", bytes_of(want[k], a.bytes), " bytes)")};
    if (got[k].size() > want[k].size()) {
      const std::size_t extra = got[k][want[k].size()];
      r.details.push_back(
          str("adding parameter ", extra, " (", a.bytes[extra], " bytes) takes bucket ", k, " to ",
              bytes_of(want[k], a.bytes) + a.bytes[extra], " bytes, past its cap of ", cap,
              k == 0 ? " (bucket 0's cap is first_cap_bytes)" : ""));
    } else {
      const std::size_t next = want[k][got[k].size()];
      r.details.push_back(str(
          "parameter ", next, " (", a.bytes[next], " bytes) still fits bucket ", k, ": ",
          bytes_of(got[k], a.bytes) + a.bytes[next], " bytes <= its cap of ", cap,
          k == 0 ? " (bucket 0's cap is first_cap_bytes)" : " (only bucket 0 has the small cap)"));
    }
    return r;
  }
  return CaseResult::ok();
}

// Drives `flush` with gradients becoming ready in `order` (parameter
// indices), as the Reducer does, and checks every launch.
CaseResult flush_case(const BucketingFns& fns, const Buckets& buckets,
                      const std::vector<std::size_t>& order) {
  std::vector<std::size_t> bucket_of(order.size()), pending;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    pending.push_back(buckets[b].size());
    for (std::size_t i : buckets[b]) bucket_of[i] = b;
  }
  const std::string where =
      str(buckets.size(), " buckets, gradients ready in the order ", list(order), ": ");
  std::size_t next = 0, launched = 0;
  for (std::size_t e = 0; e < order.size(); ++e) {
    --pending[bucket_of[order[e]]];
    std::string wrong;
    next = fns.flush(pending, next, [&](std::size_t b) {
      if (!wrong.empty()) return;
      if (b != launched) {
        wrong = b < launched
                    ? str("bucket ", b, " was launched twice")
                    : str("buckets flushed out of order: bucket ", b, " was launched while bucket ",
                          launched,
                          pending[launched] == 0
                              ? " was not launched yet"
                              : str(" still waited for ", pending[launched], " gradient(s)"));
        return;
      }
      if (pending[b] != 0) {
        wrong = str("bucket ", b, " was launched while it still waited for ", pending[b],
                    " gradient(s)");
        return;
      }
      ++launched;
    });
    if (!wrong.empty())
      return {
          .message = where + wrong,
          .details = {
              "every rank must launch the same buckets in the same order (Note [Bucket order]) or "
              "their all-reduces pair up different buckets: launch bucket `next` and the ones "
              "after "
              "it only while each is complete"}};
    std::size_t complete = 0;
    while (complete < pending.size() && pending[complete] == 0) ++complete;
    if (launched < complete)
      return {.message = str(where, "after gradient ", order[e], " became ready, buckets 0..",
                             complete - 1, " were complete but only ", launched,
                             " launched: keep launching while the next "
                             "bucket is complete")};
    if (next != launched)
      return {.message = str(where, "you launched ", launched, " buckets but returned next = ",
                             next, "; return the index of the first bucket not launched")};
  }
  return CaseResult::ok();
}

bool check_rules(const BucketingFns& fns, Report& report) {
  int cases = 0;
  for (const AssignCase& a : assign_cases()) {
    const auto [problem, result] =
        run_guarded([&] { return compare_assignment(a, fns.assign(a.bytes, a.first_cap, a.cap)); });
    if (problem != Problem::kNone) {
      report.fail(str("assign_buckets: ", result.message), result.details);
      return false;
    }
    ++cases;
  }
  report.passed("assign_buckets: ready order, caps, oversized parameters", cases);

  cases = 0;
  const std::vector<std::size_t> sizes{40, 40, 40, 40, 40, 40, 40, 40, 40};
  const Buckets buckets = ddp::assign_buckets(sizes, 80, 120);  // 4 buckets: 2, 3, 3, 1 parameters
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.rbegin(), order.rend(), 0);
  Rng rng(5);
  for (int k = 0; k < 8; ++k) {
    const auto [problem, result] = run_guarded([&] { return flush_case(fns, buckets, order); });
    if (problem != Problem::kNone) {
      report.fail(str("flush_in_order: ", result.message), result.details);
      return false;
    }
    ++cases;
    for (std::size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  }
  report.passed("flush_in_order: in index order, as soon as complete, under shuffled ready orders",
                cases);
  return true;
}

}  // namespace

void check_bucketing(const Implementations& impl, const CheckOptions& o, Report& report) {
  const BucketingFns fns = impl.bucketing;
  if (!check_rules(fns, report)) return;
  const ddp::BucketRules rules{fns.assign, fns.flush};
  // Small caps, so the six parameters (12 to 196 bytes) make several buckets.
  const MakeSync yours = [rules](std::vector<nn::Parameter*> p, comm::ProcessGroup& g) {
    return ddp::make_bucketed_sync({.mode = ddp::Mode::kBucketed,
                                    .bucket_mb = 200.0 / (1 << 20),
                                    .first_bucket_mb = 100.0 / (1 << 20)},
                                   std::move(p), g, rules);
  };
  if (!check_dp_groups(
          o, report, [&](DpRank& r) { grad_sync_cases(r, "bucketed DP with your rules", yours); }))
    return;
  const MakeSync yours_default = [rules](std::vector<nn::Parameter*> p, comm::ProcessGroup& g) {
    return ddp::make_bucketed_sync({}, std::move(p), g, rules);
  };
  sync_speed({{"unbucketed (hooked)", core_sync(ddp::Mode::kHooked)},
              {"bucketed, your rules", yours_default},
              {"bucketed, reference", core_sync(ddp::Mode::kBucketed)}},
             o, report);
}

}  // namespace mddp::labs
