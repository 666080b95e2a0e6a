// Scatter, linear: the root sends each rank its block directly.
//
// Spec. root's in[count * n] is n blocks of `count` elements; block q goes to
// rank q's out[count]. The root sends the n-1 foreign blocks one after
// another, in vrank order (root+1, root+2, ...), and copies its own block;
// every other rank makes one receive.
//
// Cost: (n-1)(alpha + S/(n beta)) at the root, for S = the whole input. The
// root must send (n-1)S/n bytes over its own link whatever the algorithm, so
// a binomial tree would save only latencies (ceil(log2 n) instead of n-1)
// while relaying blocks through other ranks; scatter is for small, rare
// payloads (sample indices, seeds), so the plain form is the clearer one.
#include <cstring>

#include "core/comm/algorithms/algorithms.h"

namespace mddp::comm {

void scatter_linear(const AlgoContext& ctx, const void* in, void* out, int64_t count, DataType t,
                    int root) {
  if (count == 0) return;
  const std::size_t bytes = bytes_of(count, t);
  if (ctx.rank != root) {
    ctx.recv(root, out, bytes);
    return;
  }
  for (int k = 1; k < ctx.size; ++k) {
    const int q = ctx.real(k, root);
    ctx.send(q, at(in, count * q, t), bytes);
  }
  const void* mine = at(in, count * root, t);
  if (mine != out) std::memmove(out, mine, bytes);
}

}  // namespace mddp::comm
