// A few ranks of the world run an algorithm written for a whole world (the
// ring, the tree) as if they were one: the hierarchical all-reduce runs a
// ring among the ranks of a host and another among one rank per host.
//
// Words: a group is an ordered list of world ranks, `members`; group rank g
// is world rank members[g]. The algorithm sees group ranks; the transport
// and the recorded steps see world ranks.
#pragma once

#include <array>
#include <vector>

#include "core/comm/algorithms/context.h"

namespace mddp::comm {

// The world's transport seen as the group's: peers are translated, nothing
// else changes (no connection is made; messages go over the world's).
class SubTransport final : public Transport {
 public:
  // `base` numbers ranks as the world does; `members` must hold base.rank().
  SubTransport(Transport& base, const std::vector<int>& members, int group_rank);
  int rank() const override { return group_rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string name() const override { return base_.name(); }
  void send_recv(int send_peer, const void* send_data, std::size_t send_bytes, int recv_peer,
                 void* recv_data, std::size_t recv_bytes, Deadline deadline) override;
  void abort(const std::string& reason) override { base_.abort(reason); }

 private:
  Transport& base_;
  const std::vector<int>& members_;
  int group_rank_;
};

// Records a group's steps into the collective's trace in world ranks, tagged
// with their level. Several groups in a row on one rank (the pieces of an
// uneven layout) number on: a group's step index i becomes i plus the
// number of that phase's indices the earlier groups used.
class LevelTrace final : public StepTrace {
 public:
  LevelTrace(StepTrace* parent, StepLevel level) : parent_(parent), level_(level) {}
  StepTrace* get() { return parent_ ? this : nullptr; }  // null when nothing is traced
  // Before each group runs.
  void begin_group(const std::vector<int>& members);
  void record(const AlgoStep& step, const void* data) override;

 private:
  StepTrace* parent_;
  StepLevel level_;
  const std::vector<int>* members_ = nullptr;
  std::array<int, 4> offset_{}, next_{};  // per StepPhase
};

// The context of a group's run: `transport` numbers the group's ranks, the
// deadline and scratch are the whole collective's.
inline AlgoContext group_context(const AlgoContext& world, Transport& transport,
                                 LevelTrace& trace) {
  return AlgoContext{transport,      transport.rank(), transport.size(),
                     world.deadline, world.scratch,    trace.get()};
}

}  // namespace mddp::comm
