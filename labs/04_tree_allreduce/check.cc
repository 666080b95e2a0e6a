// Lab 4's checker: the reduce and the broadcast alone (roots 0 and n-1),
// then the all-reduce, against the binomial tree (tree_reduce.cc,
// tree_broadcast.cc): with v = (r - root) mod n, a vrank's parent is v minus
// its lowest set bit, and its children are v + m for every power of two m
// below that bit (the root: below n) with v + m < n.
#include <algorithm>
#include <bit>

#include "core/comm/algorithms/algorithms.h"
#include "core/common/strings.h"
#include "labs/checks.h"
#include "labs/support/collective_check.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

struct TreeRank {
  int parent = -1;            // real rank, -1 for the root
  std::vector<int> children;  // real ranks
  uint32_t subtree = 0;       // real ranks under (and including) this one
};

TreeRank tree_rank(int r, int root, int n) {
  const auto real = [&](int v) { return (v + root) % n; };
  const int v = ((r - root) % n + n) % n;
  TreeRank t;
  const int low = v == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(n))) : (v & -v);
  if (v != 0) t.parent = real(v - low);
  for (int m = 1; m < low; m <<= 1)
    if (v + m < n) t.children.push_back(real(v + m));
  for (int u = v; u < v + low && u < n; ++u) t.subtree |= 1u << real(u);
  return t;
}

std::vector<std::string> diagnose_phase(bool reduce, int root, int n,
                                        const std::vector<MessageLog>& logs) {
  const std::string name = str(reduce ? "tree reduce" : "tree broadcast", " (root ", root, ")");
  for (int r = 0; r < n; ++r) {
    const TreeRank t = tree_rank(r, root, n);
    const auto& up = reduce ? logs[r].sends : logs[r].recvs;    // to / from the parent
    const auto& down = reduce ? logs[r].recvs : logs[r].sends;  // from / to the children
    if (t.parent >= 0 && (up.empty() || up[0].peer != t.parent))
      return {str(
          name, ": rank ", r,
          reduce ? " did not send to its parent, rank " : " did not receive from its parent, rank ",
          t.parent, " (vrank v minus its lowest set bit)")};
    if (t.parent < 0 && !up.empty())
      return {str(name, ": the root, rank ", r,
                  reduce ? ", sent to rank " : ", received from rank ", up[0].peer,
                  "; the root only ", reduce ? "receives" : "sends")};
    const std::string kids = join(t.children, ", ");
    for (std::size_t k = 0; k < t.children.size(); ++k)
      if (k >= down.size() ||
          std::find(t.children.begin(), t.children.end(), down[k].peer) == t.children.end())
        return {str(name, ": rank ", r,
                    reduce ? " should receive from its children, ranks "
                           : " should send to its children, ranks ",
                    kids, ", once each")};
    if (reduce && t.parent >= 0) {
      const auto p = decode(up[0].first);
      if (p && p->ranks != t.subtree)
        return {str(name, ": rank ", r, " sent its parent the contributions of ranks ",
                    rank_set(p->ranks), "; its subtree is ranks ", rank_set(t.subtree),
                    ": add every child's partial result before sending")};
    }
  }
  return {};
}

std::vector<std::string> diagnose_tree(const CollectiveCase& c,
                                       const std::vector<MessageLog>& logs) {
  const int n = c.world;
  if (c.stage == "reduce") return diagnose_phase(true, c.root, n, logs);
  if (c.stage == "broadcast") return diagnose_phase(false, c.root, n, logs);
  // The all-reduce: on every rank the reduce's messages come first, then the broadcast's.
  auto out = diagnose_phase(true, 0, n, logs);
  if (!out.empty()) return out;
  std::vector<MessageLog> rest(logs);
  for (int r = 0; r < n; ++r) {
    const TreeRank t = tree_rank(r, 0, n);
    auto drop = [](std::vector<Message>& v, std::size_t k) {
      v.erase(v.begin(), v.begin() + std::min(k, v.size()));
    };
    drop(rest[r].sends, t.parent < 0 ? 0 : 1);
    drop(rest[r].recvs, t.children.size());
  }
  return diagnose_phase(false, 0, n, rest);
}

}  // namespace

void check_tree_allreduce(const Implementations& impl, const CheckOptions& o, Report& report) {
  using Stage = CollectiveStage;
  const TreeFns fns = impl.tree;
  CollectiveLab lab;
  lab.algorithm = "tree";
  lab.stages = {
      {.name = "reduce",
       .output = Stage::Output::kRoot,
       .ops = {comm::ReduceOp::kSum, comm::ReduceOp::kAvg},
       .roots = true,
       .run =
           [fns](const comm::AlgoContext& ctx, float* data, const CollectiveCase& c) {
             fns.reduce(ctx, data, c.count, comm::DataType::kFloat32, c.op, c.root);
           }},
      {.name = "broadcast",
       .input = Stage::Input::kRootResult,
       .roots = true,
       .run =
           [fns](const comm::AlgoContext& ctx, float* data, const CollectiveCase& c) {
             fns.broadcast(ctx, data, c.count, comm::DataType::kFloat32, c.root);
           }},
      all_reduce_stage(fns.all_reduce),
  };
  lab.student_all_reduce = fns.all_reduce;
  lab.reference_all_reduce = comm::all_reduce_tree;
  lab.diagnose = diagnose_tree;
  check_collective(lab, o, report);
}

}  // namespace mddp::labs
