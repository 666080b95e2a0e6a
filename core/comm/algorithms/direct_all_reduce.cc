// Direct all-reduce: ranks of one host reduce straight out of each other's
// buffers (HostSharedMemory, shared_memory.h).
//
// Why. The ring (ring_all_reduce.cc) is built for links: a rank may only
// talk to its neighbours, and every byte it reads it first receives into
// its own memory. On one host, with the buffers in memory every rank has
// mapped, none of that is needed: any rank can read any rank's buffer where
// it lies. A message through the rings costs a copy in and a copy out (or one
// process_vm_readv) before the reduction even reads it; here the reduction
// reads it in place: fewer bytes through the memory system, and less time
// taken from the cores backward runs on (see Cost).
//
// Spec. data[count] is split into n blocks as the ring splits it (Blocks).
// For collective `seq`, rank r:
//
//   1. posts its buffer and waits for every peer's post. If any buffer is
//      private (not in its owner's arena), every rank sees it in the posts
//      and returns false: the caller runs a flat algorithm instead, on
//      every rank.
//   2. reduces block r: data_r[block r] = op(x_0, x_1, ..., x_{n-1}) read
//      from each rank's buffer, in rank order, chunk by chunk (kChunkBytes,
//      so the partial result stays in L1); kAvg then divides it by n.
//   3. writes each finished chunk, while it is still in L1, into every
//      peer's buffer, from r+1 round the ring (so the ranks do not all
//      write one buffer at once); after the last, it signals that it is
//      finished with the peers' buffers.
//   4. waits until every peer is finished with its buffer, then returns.
//
// Why no block is written while someone reads it: block r of any buffer is
// read (step 2) and then written (step 3) by rank r alone, in that order;
// the owner of the buffer does not touch it between its post and its
// return. And step 4 keeps r's buffer from its caller (the next backward
// writes gradients into DDP's buckets) until no peer reads or writes it any
// more: tests/multirank/direct_all_reduce_test.cc hunts that race with
// random delays, and fails without step 4.
//
// Bits: block b is computed once, by rank b, in rank order, and copied
// verbatim: every rank holds the same bits (though not the ring's: its sums
// run in another order).
//
// Cost per rank: step 2 reads n blocks, step 3 writes n (its own and one
// into each peer's memory): S read and S written, 2 S in all, and two
// rounds of signals (post, finished). Pulling the finished
// blocks instead would read them once more and need a third round (a
// rank may only read a block once its owner says it is final). The ring
// moves every block through a ring of shared memory first, a copy in and a
// copy out (or one process_vm_readv) before its reduction reads it, and
// pays 2(n-1) messages.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/reduce_kernels.h"

namespace mddp::comm {
namespace {

constexpr std::size_t kChunkBytes = 32 * 1024;

// Test seam (tests/multirank/direct_all_reduce_test.cc):
// MDDP_TEST_DIRECT_DELAY_US=N sleeps a random 0..N us before a rank touches
// its peers' buffers and before it says it is finished with them, widening
// every window in which a missing wait would let a buffer be overwritten
// while it is read.
void delay_for_tests() {
  static const int max_us = [] {
    const char* v = std::getenv("MDDP_TEST_DIRECT_DELAY_US");
    return v ? std::atoi(v) : 0;
  }();
  if (max_us <= 0) return;
  thread_local std::minstd_rand rng(
      static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % static_cast<unsigned>(max_us)));
}

// Steps 2 and 3 on block r (`elems` elements at byte `offset` of every
// buffer), one chunk at a time: the reduction over the ranks' inputs in
// rank order, kAvg's division, then the finished chunk, still in L1, into
// every peer's buffer. Rank r's own buffer receives the result too: for
// r < 2 it is built there in place (x_r is read by the first reduce, before
// it is overwritten); for r >= 2 that would overwrite x_r before it is
// read, so the partial result is built in a chunk of scratch.
void reduce_and_push(const AlgoContext& ctx, const std::vector<std::byte*>& buf, std::size_t offset,
                     std::size_t elems, DataType t, ReduceOp op) {
  const std::size_t es = element_size(t), step = std::max<std::size_t>(1, kChunkBytes / es);
  const int n = ctx.size;
  const auto chunk = [&](int q, std::size_t off) { return buf[static_cast<std::size_t>(q)] + off; };
  auto* acc =
      ctx.rank < 2
          ? nullptr
          : static_cast<std::byte*>(ctx.scratch.get(Scratch::kAccum, std::min(step, elems) * es));
  for (std::size_t c = 0; c < elems; c += step) {
    const std::size_t m = std::min(step, elems - c), off = offset + c * es;
    std::byte* dst = acc ? acc : chunk(ctx.rank, off);
    reduce(dst, chunk(0, off), chunk(1, off), m, t, op);
    for (int q = 2; q < n; ++q) reduce(dst, dst, chunk(q, off), m, t, op);
    if (op == ReduceOp::kAvg) divide(dst, m, t, static_cast<float>(n));
    for (int k = acc ? 0 : 1; k < n; ++k) std::memcpy(chunk(ctx.peer(k), off), dst, m * es);
  }
}

}  // namespace

bool all_reduce_direct(const AlgoContext& ctx, HostSharedMemory& shm, void* data, int64_t count,
                       DataType t, ReduceOp op) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t bytes = bytes_of(count, t);
  auto* mine = static_cast<std::byte*>(data);

  // 1. Posts.
  int64_t t0 = ctx.step_clock();
  const HostSharedMemory::Post post = shm.post(data, bytes);
  if (!post.shared) return false;  // the peers see it in the post and fall back too
  std::vector<std::byte*> in(static_cast<std::size_t>(n));
  bool all_shared = true;
  for (int q = 0; q < n; ++q) {
    in[static_cast<std::size_t>(q)] = q == r ? mine : shm.posted(q, post.seq, bytes, ctx.deadline);
    all_shared = all_shared && in[static_cast<std::size_t>(q)] != nullptr;
  }
  if (!all_shared) return false;

  // 2 and 3. This rank's block, straight out of every buffer, and into
  // every buffer as each chunk is done.
  const Blocks blocks{count, n};
  const auto block_bytes = static_cast<int64_t>(bytes_of(blocks.size(r), t));
  delay_for_tests();
  reduce_and_push(ctx, in, bytes_of(blocks.begin(r), t), static_cast<std::size_t>(blocks.size(r)),
                  t, op);
  // Steps, one per peer and direction, as the ring's are: reading block r
  // from each peer is this rank's reduce-scatter, writing it to each its
  // all-gather (they interleave chunk by chunk; the reads are timed up to
  // the last chunk, the writes up to the last peer's finish).
  for (int k = 1; k < n; ++k)
    ctx.traced({.phase = StepPhase::kReduceScatter,
                .index = k - 1,
                .recv_peer = ctx.peer(k),
                .recv_block = r,
                .recv_bytes = block_bytes},
               t0, data);
  t0 = ctx.step_clock();
  delay_for_tests();
  shm.finish(post.seq);

  // 4. Nobody reads or writes this buffer any more: the caller may.
  for (int k = 1; k < n; ++k) shm.wait_finished(ctx.peer(k), post.seq, ctx.deadline);
  for (int k = 1; k < n; ++k)
    ctx.traced({.phase = StepPhase::kAllGather,
                .index = k - 1,
                .send_peer = ctx.peer(k),
                .send_block = r,
                .send_bytes = block_bytes},
               t0, data);
  return true;
}

}  // namespace mddp::comm
