// Lab 9's checker, on real processes at every world size and over both
// transports, with roots 0 and n-1:
//  * broadcast_model: ranks build their models from different seeds; after
//    it every rank holds the root's parameters;
//  * gather_eval: rank r evaluated 5 + 2r samples (uneven shards) and got
//    3r + 1 right; the root must list every rank's counts and the accuracy
//    over all of them;
//  * save_on_root: the root's save() takes 200 ms and then writes a file; no
//    rank may return before that file exists, and only the root saves.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "labs/checks.h"
#include "labs/support/dp_check.h"
#include "labs/support/dp_fixture.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

std::string save_prefix(pid_t check) {
  return (std::filesystem::temp_directory_path() / str("microddp-lab-save-", check, "-")).string();
}

CaseResult broadcast_case(const PrimitivesFns& fns, DpRank& r, int root) {
  auto model = dp_model(100 + r.rank());
  const Grads mine = values_of(*model);
  const Grads want = values_of(*dp_model(100 + root));
  fns.broadcast_model(*model, r.comm(), root);
  const Grads got = values_of(*model);
  if (got == want) return CaseResult::ok();
  CaseResult c{.message = str("rank ", r.rank(), " does not hold root ", root,
                              "'s parameters after broadcast_model")};
  if (got == mine)
    c.details.push_back("they are still its own: every rank must take part in the broadcast");
  if (root != 0 && got == values_of(*dp_model(100)))
    c.details.push_back("they are rank 0's: broadcast from `root`");
  return c;
}

CaseResult gather_case(const PrimitivesFns& fns, DpRank& r, int root) {
  const auto counts = [](int q) { return EvalCounts{3 * q + 1, 5 + 2 * q}; };
  const GatheredEval got = fns.gather_eval(counts(r.rank()), r.comm(), root);
  if (r.rank() != root) return CaseResult::ok();
  if (static_cast<int>(got.per_rank.size()) != r.world())
    return {.message =
                str("the root got ", got.per_rank.size(), " ranks' counts, expected ", r.world())};
  int64_t correct = 0, samples = 0;
  double mean_of_accuracies = 0;
  for (int q = 0; q < r.world(); ++q) {
    const EvalCounts want = counts(q);
    if (got.per_rank[q].correct != want.correct || got.per_rank[q].samples != want.samples)
      return {.message =
                  str("the root's entry for rank ", q, " is {correct ", got.per_rank[q].correct,
                      ", samples ", got.per_rank[q].samples, "}, expected {", want.correct, ", ",
                      want.samples, "}: gather puts rank q's block at q * count")};
    correct += want.correct;
    samples += want.samples;
    mean_of_accuracies +=
        static_cast<double>(want.correct) / static_cast<double>(want.samples) / r.world();
  }
  const double want = static_cast<double>(correct) / static_cast<double>(samples);
  if (std::abs(got.accuracy - want) <= 1e-9) return CaseResult::ok();
  CaseResult c{.message = str("the root's accuracy is ", got.accuracy, ", expected ", want, " (",
                              correct, " right of ", samples, ")")};
  if (std::abs(got.accuracy - mean_of_accuracies) <= 1e-9)
    c.details.push_back(
        "that is the mean of the ranks' accuracies; their shards differ in size, so the accuracy "
        "over the whole test set is total correct / total samples");
  return c;
}

CaseResult save_case(const PrimitivesFns& fns, DpRank& r, int root, const std::string& path) {
  int saves = 0;
  fns.save_on_root(r.comm(), root, [&] {
    ++saves;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(path) << "saved\n";
  });
  if (r.rank() != root && saves > 0)
    return {.message =
                str("rank ", r.rank(), " ran save(); only the root (rank ", root, ") saves")};
  if (r.rank() == root && saves != 1)
    return {.message = str("the root ran save() ", saves, " times; once")};
  if (!std::filesystem::exists(path))
    return {.message = str("rank ", r.rank(),
                           " returned from save_on_root before the root's save() had finished"),
            .details = {"a barrier after the root's save makes every rank wait until it is done"}};
  return CaseResult::ok();
}

void primitives_cases(DpRank& r, const PrimitivesFns& fns) {
  std::vector<int> roots{0};
  if (r.world() > 1) roots.push_back(r.world() - 1);
  for (int root : roots)
    if (!r.run(str("broadcast_model, root ", root), [&] { return broadcast_case(fns, r, root); }))
      return;
  for (int root : roots)
    if (!r.run(str("gather_eval, root ", root), [&] { return gather_case(fns, r, root); })) return;
  for (int root : roots) {
    // One file per group and root, shared by the group's ranks; the check
    // (the ranks' parent, whose pid names it) removes them at the end.
    const std::string path =
        str(save_prefix(::getppid()), r.comm().transport_name(), "-", r.world(), "-", root);
    if (!r.run(str("save_on_root, root ", root), [&] { return save_case(fns, r, root, path); }))
      return;
  }
}

}  // namespace

void check_sync_primitives(const Implementations& impl, const CheckOptions& o, Report& report) {
  const PrimitivesFns fns = impl.primitives;
  const bool ok = check_dp_groups(o, report, [&](DpRank& r) { primitives_cases(r, fns); });
  const std::string prefix = save_prefix(::getpid());
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec))
    if (e.path().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
  if (ok) report.note("(no speed comparison: these run once per job, at its edges)");
}

}  // namespace mddp::labs
