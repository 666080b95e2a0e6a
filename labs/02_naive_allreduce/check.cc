// Lab 2's checker: the all-reduce against the naive algorithm's schedule
// (naive_all_reduce.cc): every rank but 0 sends its buffer to rank 0 and
// receives the result from it; rank 0 receives from each of them once and
// sends to each once.
#include "core/comm/algorithms/algorithms.h"
#include "labs/checks.h"
#include "labs/support/collective_check.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

std::vector<std::string> diagnose_naive(const CollectiveCase& c,
                                        const std::vector<MessageLog>& logs) {
  const int n = c.world;
  for (int r = 1; r < n; ++r) {
    const MessageLog& l = logs[r];
    if (l.sends.size() != 1 || l.sends[0].peer != 0)
      return {str("rank ", r, " sent ", l.sends.size(), " message(s)",
                  l.sends.empty() ? "" : str(", the first to rank ", l.sends[0].peer),
                  "; in the naive all-reduce every rank but 0 sends exactly one: its whole buffer, "
                  "to rank 0")};
    if (l.recvs.size() != 1 || l.recvs[0].peer != 0)
      return {str("rank ", r, " received ", l.recvs.size(),
                  " message(s); it should receive exactly one, the result, from rank 0")};
  }
  const MessageLog& root = logs[0];
  std::vector<int> heard(static_cast<std::size_t>(n), 0), told(static_cast<std::size_t>(n), 0);
  for (const Message& m : root.recvs)
    if (m.peer > 0 && m.peer < n) ++heard[m.peer];
  for (const Message& m : root.sends)
    if (m.peer > 0 && m.peer < n) ++told[m.peer];
  for (int q = 1; q < n; ++q) {
    if (heard[q] != 1)
      return {str("rank 0 received ", heard[q], " message(s) from rank ", q,
                  "; it should receive exactly one")};
    if (told[q] != 1)
      return {str("rank 0 sent ", told[q], " message(s) to rank ", q,
                  "; it should send the result once")};
  }
  // The result rank 0 sent must be complete.
  const auto p = decode(root.sends.front().first);
  if (p && p->ranks != (1u << n) - 1)
    return {str("rank 0 sent out a result holding the contributions of ranks ", rank_set(p->ranks),
                " only: combine every received buffer into your own before sending")};
  return {};
}

}  // namespace

void check_naive_allreduce(const Implementations& impl, const CheckOptions& o, Report& report) {
  const AllReduceFn fn = impl.naive_allreduce;
  CollectiveLab lab;
  lab.algorithm = "naive";
  lab.stages = {all_reduce_stage(fn)};
  lab.student_all_reduce = fn;
  lab.reference_all_reduce = comm::all_reduce_naive;
  lab.diagnose = diagnose_naive;
  check_collective(lab, o, report);
}

}  // namespace mddp::labs
