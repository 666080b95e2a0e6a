// WatchedGroup: a ProcessGroup that passes every call on to another and
// notes when it happened — in which phase of the step (the checker names
// them: "backward", "finish", "micro-batch 1", ...) each collective was
// issued and first waited for. How a checker tells hooks that launch
// during backward from a naive loop after it, and no_sync from syncing on
// every micro-batch. Single-threaded, like a training loop.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm/process_group.h"

namespace mddp::labs {

class WatchedGroup : public comm::ProcessGroup {
 public:
  struct Call {
    std::string op;  // all_reduce | reduce_scatter | all_gather | broadcast | barrier
    int64_t count = 0;
    std::string issued_in, waited_in;  // phases ("" until waited)
  };

  explicit WatchedGroup(comm::ProcessGroup& inner) : inner_(inner) {}

  void set_phase(std::string phase) { phase_ = std::move(phase); }
  const std::vector<Call>& calls() const { return *calls_; }
  void clear() { calls_->clear(); }
  // Calls issued (or waited) in `phase`.
  int64_t issued_in(const std::string& phase) const;
  int64_t waited_in(const std::string& phase) const;

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string transport_name() const override { return inner_.transport_name(); }
  comm::WorkPtr all_reduce(void* data, int64_t count, comm::DataType dtype,
                           comm::ReduceOp op) override;
  comm::WorkPtr reduce_scatter(const void* in, void* out, int64_t count, comm::DataType dtype,
                               comm::ReduceOp op) override;
  comm::WorkPtr all_gather(const void* in, void* out, int64_t count, comm::DataType dtype) override;
  comm::WorkPtr broadcast(void* data, int64_t count, comm::DataType dtype, int root) override;
  comm::WorkPtr barrier() override;
  void abort(const std::string& reason) override { inner_.abort(reason); }
  std::vector<comm::CollectiveRecord> history() const override { return inner_.history(); }

 private:
  comm::WorkPtr watch(const char* op, int64_t count, comm::WorkPtr work);

  comm::ProcessGroup& inner_;
  std::string phase_;
  // Shared with the Work wrappers, which may outlive a clear().
  std::shared_ptr<std::vector<Call>> calls_ = std::make_shared<std::vector<Call>>();
};

}  // namespace mddp::labs
