// Three of the four GradSync strategies (see grad_sync.h): naive, hooked and
// bucketed; the fourth, sharded, is a Reducer in sharded_sync.h. Private to core/ddp.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "core/ddp/bucket_assignment.h"
#include "core/ddp/grad_sync.h"
#include "core/ddp/sync_unit.h"

namespace mddp::ddp {

// One unit per parameter, in registration order (naive and hooked mode).
std::vector<std::unique_ptr<SyncUnit>> units_per_parameter(
    const std::vector<nn::Parameter*>& params, const Compression& compress);

class NaiveSync : public GradSync {
 public:
  NaiveSync(std::vector<nn::Parameter*> params, const Compression& compress,
            comm::ProcessGroup& comm);
  void on_grad_ready(nn::Parameter& p) override;
  void finish() override;

 private:
  comm::ProcessGroup& comm_;
  std::vector<std::unique_ptr<SyncUnit>> units_;
};

class HookedSync : public GradSync {
 public:
  HookedSync(std::vector<nn::Parameter*> params, const Compression& compress,
             comm::ProcessGroup& comm);
  void on_grad_ready(nn::Parameter& p) override;
  void finish() override;

 private:
  comm::ProcessGroup& comm_;
  std::unordered_map<const nn::Parameter*, std::size_t> index_of_;
  std::vector<std::unique_ptr<SyncUnit>> units_;
  std::vector<int> uses_, uses_left_;      // contributions per backward, and still to come
  std::vector<std::size_t> pending_;       // a parameter is its own bucket: 1 until final
  std::vector<std::size_t> launch_order_;  // FIFO: the order the communicator runs them
};

// Bucketed DDP, PyTorch's Reducer in miniature. See reducer.cc.
class Reducer : public GradSync {
 public:
  // The unit that synchronises bucket `index`: its flat buffer and the
  // gradients in it (views, in bucket order).
  using MakeUnit = std::function<std::unique_ptr<SyncUnit>(int index, tensor::Tensor flat,
                                                           std::vector<tensor::Tensor> views)>;
  // Units from options.compress (make_sync_unit), buffers of exactly the
  // bucket's gradients.
  Reducer(std::vector<nn::Parameter*> params, const SyncOptions& options, comm::ProcessGroup& comm,
          BucketRules rules);
  // Units from `make_unit`; each flat buffer zero-padded to a multiple of
  // `pad_to` elements (ZeRO-1's equal shards).
  Reducer(std::vector<nn::Parameter*> params, const SyncOptions& options, comm::ProcessGroup& comm,
          BucketRules rules, int64_t pad_to, const MakeUnit& make_unit);
  void on_grad_ready(nn::Parameter& p) override;
  void finish() override;
  // For tests and `demo hooks`: parameter indices per bucket.
  const std::vector<std::vector<std::size_t>>& buckets() const { return assignment_; }
  // Bucket b's flat gradient buffer (padded where pad_to asked).
  const tensor::Tensor& flat_grads(std::size_t b) const { return flat_[b]; }

 protected:
  comm::ProcessGroup& comm_;

 private:
  struct Slot {  // where a parameter lives
    std::size_t param, bucket;
  };
  BucketRules rules_;
  std::vector<std::vector<std::size_t>> assignment_;
  std::vector<tensor::Tensor> flat_;              // one flat buffer per bucket
  std::vector<std::unique_ptr<SyncUnit>> units_;  // one per bucket
  std::vector<std::size_t> pending_;              // gradients still missing, per bucket
  std::vector<std::size_t> bucket_size_;          // parameters per bucket
  std::vector<int> uses_, uses_left_;             // contributions per backward, and still to come
  std::unordered_map<const nn::Parameter*, Slot> slot_of_;
  std::size_t next_to_launch_ = 0;
};

}  // namespace mddp::ddp
