// Gather, linear: every rank sends its block straight to the root.
//
// Spec. Rank q's in[count] becomes block q of root's out[count * n]. Each
// non-root rank makes one send; the root receives the n-1 blocks one after
// another in vrank order (root+1, root+2, ...), each directly into place, and
// copies its own block.
//
// Cost: (n-1)(alpha + S/(n beta)) at the root, for S = the gathered size:
// the mirror image of linear_scatter.cc, and for the same reason (the root's
// link must carry (n-1)S/n bytes anyway) not a tree. Gather is for small
// payloads: losses and metrics to rank 0 for logging.
#include <cstring>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void gather_linear(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t,
                   int root) {
  if (count == 0) return;
  const std::size_t bytes = bytes_of(count, t);
  if (ctx.rank != root) {
    ctx.send(root, in, bytes);
    return;
  }
  for (int k = 1; k < ctx.size; ++k) {
    const int q = ctx.real(k, root);
    ctx.recv(q, at(out, count * q, t), bytes);
  }
  void* mine = at(out, count * root, t);
  if (mine != in) std::memmove(mine, in, bytes);
}

}  // namespace mddp::comm
