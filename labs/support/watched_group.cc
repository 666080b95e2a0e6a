#include "labs/support/watched_group.h"

namespace mddp::labs {
namespace {

// A Work that notes the phase of its first wait().
class WatchedWork : public comm::Work {
 public:
  WatchedWork(comm::WorkPtr inner, std::shared_ptr<std::vector<WatchedGroup::Call>> calls,
              std::size_t index, const std::string& phase)
      : inner_(std::move(inner)), calls_(std::move(calls)), index_(index), phase_(phase) {}
  void wait() override {
    if (index_ < calls_->size() && (*calls_)[index_].waited_in.empty())
      (*calls_)[index_].waited_in = phase_;
    inner_->wait();
  }
  bool completed() const override { return inner_->completed(); }
  int64_t start_ns() const override { return inner_->start_ns(); }
  int64_t end_ns() const override { return inner_->end_ns(); }
  int64_t ready_ns() const override { return inner_->ready_ns(); }
  const std::vector<comm::AlgoStep>& steps() const override { return inner_->steps(); }

 private:
  comm::WorkPtr inner_;
  std::shared_ptr<std::vector<WatchedGroup::Call>> calls_;
  std::size_t index_;
  const std::string& phase_;  // the group's current phase, read at wait()
};

}  // namespace

int64_t WatchedGroup::issued_in(const std::string& phase) const {
  int64_t n = 0;
  for (const Call& c : *calls_) n += c.issued_in == phase;
  return n;
}

int64_t WatchedGroup::waited_in(const std::string& phase) const {
  int64_t n = 0;
  for (const Call& c : *calls_) n += c.waited_in == phase;
  return n;
}

comm::WorkPtr WatchedGroup::watch(const char* op, int64_t count, comm::WorkPtr work) {
  calls_->push_back({op, count, phase_, ""});
  return std::make_shared<WatchedWork>(std::move(work), calls_, calls_->size() - 1, phase_);
}

comm::WorkPtr WatchedGroup::all_reduce(void* data, int64_t count, comm::DataType dtype,
                                       comm::ReduceOp op) {
  return watch("all_reduce", count, inner_.all_reduce(data, count, dtype, op));
}
comm::WorkPtr WatchedGroup::all_gather(const void* in, void* out, int64_t count,
                                       comm::DataType dtype) {
  return watch("all_gather", count, inner_.all_gather(in, out, count, dtype));
}
comm::WorkPtr WatchedGroup::reduce_scatter(const void* in, void* out, int64_t count,
                                           comm::DataType dtype, comm::ReduceOp op) {
  return watch("reduce_scatter", count, inner_.reduce_scatter(in, out, count, dtype, op));
}
comm::WorkPtr WatchedGroup::broadcast(void* data, int64_t count, comm::DataType dtype, int root) {
  return watch("broadcast", count, inner_.broadcast(data, count, dtype, root));
}
comm::WorkPtr WatchedGroup::barrier() {
  return watch("barrier", 0, inner_.barrier());
}

}  // namespace mddp::labs
