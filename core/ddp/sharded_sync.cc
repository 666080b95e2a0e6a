#include "core/ddp/sharded_sync.h"

#include "core/common/check.h"
#include "core/ddp/shard_units.h"
#include "core/tensor/ops.h"

namespace mddp::ddp {
namespace {

const SyncOptions& checked(const SyncOptions& options) {
  check_sharded_compression(options.compress);
  return options;
}

}  // namespace

ShardedSync::ShardedSync(std::vector<nn::Parameter*> params, const SyncOptions& options,
                         comm::ProcessGroup& comm)
    : Reducer(params, checked(options), comm, BucketRules{}, comm.size(),
              [compress = options.compress](int index, tensor::Tensor flat,
                                            std::vector<tensor::Tensor>) {
                return std::make_unique<ShardUnit>(index, std::move(flat), SpanOp::kReduceScatter,
                                                   compress);
              }) {
  const int n = comm.size();
  for (std::size_t b = 0; b < buckets().size(); ++b) {
    ShardedBucket& s = sharded_.emplace_back();
    s.grads = flat_grads(b);
    s.values = tensor::Tensor::zeros({s.grads.numel()},
                                     s.grads.device());  // zero padding (Note [Sharded buckets])
    s.shard_numel = s.grads.numel() / n;
    s.shard_begin = s.shard_numel * comm.rank();
    int64_t offset = 0;
    for (std::size_t i : buckets()[b]) {
      nn::Parameter* p = params[i];
      tensor::Tensor view = s.values.view(offset, p->value.shape());
      tensor::copy(p->value, view);
      p->value = view;
      s.params.emplace_back(p, offset);
      offset += view.numel();
    }
    gathers_.push_back(
        std::make_unique<ShardUnit>(static_cast<int>(b), s.values, SpanOp::kAllGather));
  }
}

void ShardedSync::gather(std::size_t b) {
  MDDP_CHECK(b < gathers_.size() && !gathers_[b]->launched(), "bucket ", b,
             " gathered twice or does not exist");
  gathers_[b]->launch(comm_);
}

void ShardedSync::finish_gather() {
  for (auto& g : gathers_) {
    MDDP_CHECK(g->launched(),
               "finish_gather: a bucket's parameters were not gathered in this step");
    g->complete(stats_);
  }
}

}  // namespace mddp::ddp
