// Recursive-doubling all-reduce: log2 n exchanges of the whole buffer
// (what MPICH and Open MPI run for small messages).
//
// Spec. n a power of two: in round k = 0, 1, ..., log2 n - 1 rank r and its
// partner r XOR 2^k swap their whole buffers (one exchange, both directions
// in flight) and both combine them. Before round k every aligned group of
// 2^k ranks (equal r / 2^k) holds one partial result, the reduction of its
// members' inputs; the round merges each group with its neighbour group, so
// after log2 n rounds every rank holds the reduction of all n:
//
//   n = 4, round 0: 0<->1  2<->3   (0,1 hold x0+x1; 2,3 hold x2+x3)
//          round 1: 0<->2  1<->3   (everyone holds x0+x1+x2+x3)
//
// n not a power of two (MPICH's scheme): p = the largest power of two
// <= n, e = n - p. Ranks 0 .. 2e-1 pair up, r even with r+1:
//   fold-in  (round 0) the odd rank sends its buffer to the even one, which
//            combines it, and sits out;
//   exchange (rounds 1 ..) the p ranks left (each pair's even rank and the
//            ranks 2e .. n-1) run the power-of-two algorithm, renumbered
//            0 .. p-1 in rank order;
//   send-back the even rank of each pair sends the result to its odd one.
//
//   n = 3: fold-in 1->0;  round 1: 0<->2;  send-back 0->1
//
// Every rank ends with the same bits. The two ends of an exchange compute
// op(a, b) and op(b, a); IEEE +, max and min are commutative in value but
// not always in bits: reduce_kernels' max(+0, -0) is +0 while max(-0, +0)
// is -0, and on x86 a sum of two NaNs keeps the first one's payload. So
// both ends combine in rank order, op(lower rank's partial, higher rank's),
// the same expression on both sides; by the induction above (groups in the
// exchange's numbering) every rank then holds identical bits, which the
// send-back copies. kAvg divides by n once, after
// the last exchange, on every rank that ran it (the same division of the same
// bits), before the send-back.
//
// Steps (Work::steps()), whole buffers (blocks -1): the fold-in is a kReduce
// step of index 0, each exchange a kReduce step indexed by its round with
// the partner on both sides, the send-back a kBroadcast step of index 0.
//
// 16-bit types: reduce() widens both operands, combines in fp32 and rounds
// once, so every hop rounds once and the wire carries 16-bit partial
// results; a value is rounded ceil(log2 n) times (+1 for kAvg's division),
// within the bound of reduce_kernels.h.
//
// Cost (L = floor(log2 n); 2 more steps when n is not a power of two):
//
//     T_doubling = (L + 2[n != 2^L]) (alpha + S/beta),  plus S of reduction
//                  per exchange (and at the fold-in)
//
// Against the ring's 2(n-1)(alpha + S/(n beta)) it pays log2 n latencies
// instead of 2(n-1), so it wins for small, latency-bound messages (one round
// trip instead of two at n = 2). It loses for large ones: each rank moves and
// reduces the whole S every step, where the ring moves S/n, so log2(n) S
// bytes per rank against 2S(n-1)/n. At n = 2 the bytes on the wire are the
// same (S each way), but each rank reduces S instead of S/2, and nothing is
// pipelined: where the ring's segments let a reduction overlap the next
// segment's transfer (Note [What the segments overlap] in
// ring_reduce_scatter.cc), this reduces only once the whole buffer is in.
// Against the tree's 2 ceil(log2 n) rounds of S it takes fewer steps and
// reduces as much; the price is that all n ranks send S at once in every
// round.
// choose_all_reduce_algorithm (auto_select.cc) picks it for small messages.
//
// Memory: one scratch buffer of S for the incoming partial result (the ring
// needs one segment).
#include <bit>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {
namespace {

// The world rank of rank `v` of the power-of-two exchange when the first
// `e` pairs have folded into their even rank.
int exchange_rank(int v, int e) {
  return v < e ? 2 * v : v + e;
}

}  // namespace

void all_reduce_doubling(const AlgoContext& ctx, void* data, int64_t count, DataType t,
                         ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  if (count == 0 || n == 1) return;
  const auto elems = static_cast<std::size_t>(count);
  const std::size_t bytes = bytes_of(count, t);
  const auto b = static_cast<int64_t>(bytes);
  const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int e = n - p;
  const bool paired = r < 2 * e;  // in a pair that folds into its even rank

  if (paired && r % 2 == 1) {  // the odd rank of a pair: fold in, wait for the result
    int64_t t0 = ctx.step_clock();
    ctx.send(r - 1, data, bytes);
    ctx.traced({.phase = StepPhase::kReduce, .send_peer = r - 1, .send_bytes = b}, t0, data);
    t0 = ctx.step_clock();
    ctx.recv(r - 1, data, bytes);
    ctx.traced({.phase = StepPhase::kBroadcast, .recv_peer = r - 1, .recv_bytes = b}, t0, data);
    return;
  }

  void* incoming = ctx.scratch.get(Scratch::kRecv, bytes);
  // data = op(lower rank's partial, higher rank's): see the spec on bits.
  const auto combine = [&](int peer) {
    if (r < peer)
      reduce(data, data, incoming, elems, t, op);
    else
      reduce(data, incoming, data, elems, t, op);
  };

  if (paired) {  // fold-in: the even rank takes its odd partner's buffer
    const int64_t t0 = ctx.step_clock();
    ctx.recv(r + 1, incoming, bytes);
    combine(r + 1);
    ctx.traced({.phase = StepPhase::kReduce, .recv_peer = r + 1, .recv_bytes = b}, t0, data);
  }

  const int v = paired ? r / 2 : r - e;  // rank in the exchange
  int round = e > 0 ? 1 : 0;             // round 0 is the fold-in, on every rank
  for (int mask = 1; mask < p; mask <<= 1, ++round) {
    const int partner = exchange_rank(v ^ mask, e);
    const int64_t t0 = ctx.step_clock();
    ctx.exchange(partner, data, bytes, partner, incoming, bytes);
    combine(partner);
    ctx.traced({.phase = StepPhase::kReduce,
                .index = round,
                .send_peer = partner,
                .recv_peer = partner,
                .send_bytes = b,
                .recv_bytes = b},
               t0, data);
  }
  if (op == ReduceOp::kAvg) divide(data, elems, t, static_cast<float>(n));

  if (paired) {  // send-back
    const int64_t t0 = ctx.step_clock();
    ctx.send(r + 1, data, bytes);
    ctx.traced({.phase = StepPhase::kBroadcast, .send_peer = r + 1, .send_bytes = b}, t0, data);
  }
}

}  // namespace mddp::comm
