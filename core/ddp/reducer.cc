// Bucketed DDP: PyTorch's Reducer in miniature. docs/bucketing.md, docs/ddp.md.
//
// Note [Grad views]
// ~~~~~~~~~~~~~~~~~
// Each bucket owns one flat fp32 buffer, and every parameter's grad is
// re-pointed to a view into it (tensor::Tensor::view). Backward therefore
// writes gradients straight into the buffer that is all-reduced, and the
// averaged result is already where the optimiser reads it: no copy into or
// out of the bucket. (A reducer that copies gradients into a bucket must
// copy every one back; one that misses some leaves those parameters with
// their un-averaged gradient. Views make that bug impossible, and
// tests/ddp/ddp_grad_test.cc checks every parameter anyway.)
//
// Note [Shared buckets]
// ~~~~~~~~~~~~~~~~~~~~~
// On one host (the shm transport, all-reduce auto) the flat buffers are
// allocated from the communicator's shared arena (ProcessGroup::
// allocate_shared), which every rank of the host has mapped: the all-reduce
// then reads each peer's bucket where it lies instead of copying it through
// a ring (core/comm/algorithms/direct_all_reduce.cc, docs/allreduce.md).
// It returns only once no peer reads this rank's bucket any more, so the
// next backward may write into it.
//
// Flush rule: each bucket counts the gradients it still waits for; the hook
// decrements the count, and buckets are launched strictly in index order
// (See Note [Bucket order] in bucket_assignment.h) as soon as a bucket and
// all before it are complete, so all ranks issue identical collectives.
// A parameter used several times in forward (the GPT's tied embedding,
// Note [Tied weight] in core/nn/gpt.h) fires its hook after each
// contribution; only its last counts it off its bucket (count_contribution,
// Note [Contributions]), so the bucket cannot leave with a partial sum
// (tests/ddp/ddp_tied_weight_test.cc); a firing beyond its uses is an error.
// finish() checks every bucket was launched, then waits for them.
#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/ddp/bucket_assignment.h"
#include "core/ddp/strategies.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {
namespace {

// The assignment's contract (bucket_assignment.h), checked because the rule
// is replaceable: every parameter in exactly one bucket, no empty bucket.
void check_assignment(const std::vector<std::vector<std::size_t>>& buckets,
                      std::size_t num_params) {
  std::vector<int> seen(num_params, 0);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    MDDP_CHECK(!buckets[b].empty(), "bucket ", b, " of the assignment is empty");
    for (std::size_t i : buckets[b]) {
      MDDP_CHECK(i < num_params, "bucket ", b, " holds parameter ", i, " of only ", num_params);
      MDDP_CHECK(seen[i]++ == 0, "parameter ", i, " is in two buckets");
    }
  }
  for (std::size_t i = 0; i < num_params; ++i)
    MDDP_CHECK(seen[i] == 1, "parameter ", i, " is in no bucket");
}

// A bucket's flat buffer, zeroed (padding must stay zero): on the CPU in
// shared memory where the process group has it, so that peers on this host
// reduce straight out of it (Note [Shared buckets]).
tensor::Tensor bucket_buffer(comm::ProcessGroup& comm, int64_t numel, tensor::Device device) {
  if (device.is_cpu())
    if (auto memory = comm.allocate_shared(static_cast<std::size_t>(numel) * sizeof(float)))
      return tensor::Tensor::wrap({numel}, std::move(memory));  // zero: fresh tmpfs pages
  return tensor::Tensor::zeros({numel}, device);
}

}  // namespace

Reducer::Reducer(std::vector<nn::Parameter*> params, const SyncOptions& options,
                 comm::ProcessGroup& comm, BucketRules rules)
    : Reducer(std::move(params), options, comm, rules, 1,
              [&options](int index, tensor::Tensor flat, std::vector<tensor::Tensor> views) {
                return make_sync_unit(index, std::move(flat), std::move(views), options.compress);
              }) {}

Reducer::Reducer(std::vector<nn::Parameter*> params, const SyncOptions& options,
                 comm::ProcessGroup& comm, BucketRules rules, int64_t pad_to,
                 const MakeUnit& make_unit)
    : comm_(comm), rules_(rules) {
  std::vector<std::size_t> bytes;
  for (nn::Parameter* p : params) bytes.push_back(p->grad.bytes());
  assignment_ = rules_.assign(bytes, bucket_cap_bytes(options.first_bucket_mb, "--first-bucket-mb"),
                              bucket_cap_bytes(options.bucket_mb, "--bucket-mb"));
  check_assignment(assignment_, params.size());
  uses_ = uses_of(params);

  for (std::size_t b = 0; b < assignment_.size(); ++b) {
    int64_t numel = 0;
    for (std::size_t i : assignment_[b]) numel += params[i]->grad.numel();
    const int64_t padded = (numel + pad_to - 1) / pad_to * pad_to;  // the padding stays zero
    const tensor::Device device = params[assignment_[b].front()]->grad.device();
    tensor::Tensor flat = bucket_buffer(comm, padded, device);
    int64_t offset = 0;
    std::vector<tensor::Tensor> views;
    for (std::size_t i : assignment_[b]) {
      nn::Parameter* p = params[i];
      tensor::Tensor view = flat.view(offset, p->grad.shape());
      tensor::copy(p->grad, view);  // keep whatever the gradient held
      p->grad = view;
      slot_of_[p] = {i, b};
      offset += view.numel();
      views.push_back(view);
    }
    flat_.push_back(flat);
    units_.push_back(make_unit(static_cast<int>(b), flat, std::move(views)));
    bucket_size_.push_back(assignment_[b].size());
  }
  pending_ = bucket_size_;
  uses_left_ = uses_;
}

void Reducer::on_grad_ready(nn::Parameter& p) {
  auto it = slot_of_.find(&p);
  MDDP_CHECK(it != slot_of_.end(), "grad-ready hook for unknown parameter ", p.name);
  const auto [i, b] = it->second;
  MDDP_CHECK(uses_left_[i] > 0, "parameter ", p.name, " became ready more often than it is used (",
             uses_[i], ") in one backward");
  if (rules_.count(uses_left_, pending_, i, b)) units_[b]->mark_ready(now_ns());
  next_to_launch_ = rules_.flush(pending_, next_to_launch_, [this](std::size_t k) {
    MDDP_CHECK(k < units_.size() && !units_[k]->launched(), "bucket ", k,
               " launched twice or does not exist");
    units_[k]->launch(comm_);
  });
}

void Reducer::finish() {
  stats_ = {};
  if (next_to_launch_ != units_.size()) {
    const std::size_t b = next_to_launch_;
    throw Error(str("DDP: bucket ", b, " was never launched: ", pending_[b], " of its ",
                    bucket_size_[b],
                    " gradients did not arrive in this backward (a parameter unused in forward?)"));
  }
  const int64_t t0 = now_ns();
  for (auto& u : units_) u->advance(comm_);  // PowerSGD's second round (sync_unit.h)
  for (auto& u : units_) u->complete(stats_);
  stats_.exposed_ms = ns_to_ms(now_ns() - t0);
  pending_ = bucket_size_;
  uses_left_ = uses_;
  next_to_launch_ = 0;
}

}  // namespace mddp::ddp
