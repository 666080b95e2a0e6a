// Ring reduce-scatter.
//
// Spec. The n ranks form a ring: each sends to its right neighbour and
// receives from its left (AlgoContext::right/left). The buffer is split into
// n blocks (Blocks: balanced, sizes differ by at most one element, some empty
// when count < n). In step s = 0 .. n-2, rank r
//
//   sends    block (r - s - 1) mod n  (its partial result, or its own data at s = 0)
//   receives block (r - s - 2) mod n  from the left, and reduces it into its own copy,
//
// so each block travels once round the ring, picking up one contribution per
// hop, and after n-1 steps rank r holds the full reduction of block r (the
// last block it received is (r - n) mod n = r).
//
// Segments: each step moves its block as segments of at most kSegmentBytes.
// Segment k is exchanged with Transport::send_recv (both directions in flight
// at once, so two neighbours sending large blocks cannot deadlock) into a
// segment-sized scratch buffer and reduced from there while it is still in
// cache; the next segment's exchange follows at once. The scratch is one
// segment however large the message. See Note [What the segments overlap].
//
// Note [What the segments overlap]. A segment's transfer overlaps the
// reduction of the one before only where something other than this rank's
// cores moves the bytes: a NIC's DMA, or a neighbour that runs ahead and has
// its next segment in flight (in socket buffers or the shared-memory ring)
// while this rank reduces. On one host the "wire" is a memcpy made by the
// same two cores that reduce, so the gain here is cache locality and bounded
// scratch, not hidden transfer time.
//
// Cost: n-1 steps of one block each way:  (n-1)(alpha + S/(n beta)), plus
// the reduction of (n-1)S/n bytes. Per-rank traffic (n-1)S/n sent and received.
//
// 16-bit types: each hop widens both operands to fp32, combines and rounds
// once (reduce_kernels.h), so only the wire is 16-bit.
#include <algorithm>
#include <cstring>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {
namespace {

// The step loop shared by the in-place form (all-reduce: block c is built in
// data's block c) and the out-of-place form (reduce_scatter: every partial
// block is built in `out`, whose segment k is overwritten only after it was
// sent).
void run_ring(const AlgoContext& ctx, const std::byte* contrib, std::byte* work, bool in_place,
              Blocks blocks, DataType t, ReduceOp op) {
  const int n = ctx.size;
  const auto es = static_cast<int64_t>(element_size(t));
  const int64_t seg = std::max<int64_t>(1, static_cast<int64_t>(kSegmentBytes) / es);
  auto acc = [&](int b) { return in_place ? work + blocks.begin(b) * es : work; };
  auto own = [&](int b) { return contrib + blocks.begin(b) * es; };
  auto* scratch = static_cast<std::byte*>(ctx.scratch.get(
      Scratch::kRecv, static_cast<std::size_t>(std::min(seg, blocks.size(0)) * es)));

  for (int s = 0; s < n - 1; ++s) {
    const int send_b = ctx.peer(-s - 1);
    const int recv_b = ctx.peer(-s - 2);
    const std::byte* send_base = s == 0 ? own(send_b) : acc(send_b);
    const int64_t send_n = blocks.size(send_b), recv_n = blocks.size(recv_b);
    const int64_t t0 = ctx.step_clock();
    for (int64_t off = 0; off < std::max(send_n, recv_n); off += seg) {
      const int64_t sn = std::clamp<int64_t>(send_n - off, 0, seg);
      const int64_t rn = std::clamp<int64_t>(recv_n - off, 0, seg);
      ctx.exchange(ctx.right(), send_base + off * es, static_cast<std::size_t>(sn * es), ctx.left(),
                   scratch, static_cast<std::size_t>(rn * es));
      if (rn > 0) {
        reduce(acc(recv_b) + off * es, own(recv_b) + off * es, scratch,
               static_cast<std::size_t>(rn), t, op);
      }
    }
    ctx.traced({.phase = StepPhase::kReduceScatter,
                .index = s,
                .send_peer = ctx.right(),
                .recv_peer = ctx.left(),
                .send_block = send_b,
                .recv_block = recv_b,
                .send_bytes = send_n * es,
                .recv_bytes = recv_n * es},
               t0, work);
  }
  // The spec's claim: the block received last, fully reduced, is block r.
  MDDP_CHECK_EQ(ctx.peer(-(n - 2) - 2), ctx.rank);
}

}  // namespace

void ring_reduce_scatter_inplace(const AlgoContext& ctx, void* data, Blocks blocks, DataType t,
                                 ReduceOp op) {
  MDDP_CHECK_EQ(blocks.parts, ctx.size);
  if (blocks.count == 0 || ctx.size == 1) return;
  auto* bytes = static_cast<std::byte*>(data);
  run_ring(ctx, bytes, bytes, /*in_place=*/true, blocks, t, op);
}

void reduce_scatter_ring(const AlgoContext& ctx, const void* in, void* out, int64_t count,
                         DataType t, ReduceOp op) {
  if (count == 0) return;
  const Blocks blocks{count * ctx.size, ctx.size};
  if (ctx.size == 1) {
    if (in != out) std::memmove(out, in, bytes_of(count, t));
  } else if (out == at(in, count * ctx.rank, t)) {  // in place: out is block r of in
    ring_reduce_scatter_inplace(ctx, const_cast<void*>(in), blocks, t, op);
  } else {
    run_ring(ctx, static_cast<const std::byte*>(in), static_cast<std::byte*>(out),
             /*in_place=*/false, blocks, t, op);
  }
  if (op == ReduceOp::kAvg)
    divide(out, static_cast<std::size_t>(count), t, static_cast<float>(ctx.size));
}

}  // namespace mddp::comm
