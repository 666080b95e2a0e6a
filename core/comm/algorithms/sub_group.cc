#include "core/comm/algorithms/sub_group.h"

#include <algorithm>

namespace mddp::comm {

SubTransport::SubTransport(Transport& base, const std::vector<int>& members, int group_rank)
    : base_(base), members_(members), group_rank_(group_rank) {
  MDDP_CHECK(group_rank >= 0 && group_rank < static_cast<int>(members.size()), "group rank ",
             group_rank, " of ", members.size());
  MDDP_CHECK_EQ(members[static_cast<std::size_t>(group_rank)], base.rank());
}

void SubTransport::send_recv(int send_peer, const void* send_data, std::size_t send_bytes,
                             int recv_peer, void* recv_data, std::size_t recv_bytes,
                             Deadline deadline) {
  const auto world = [&](int g) {
    if (g == kNoPeer) return kNoPeer;
    check_message(g, nullptr, 0);
    return members_[static_cast<std::size_t>(g)];
  };
  base_.send_recv(world(send_peer), send_data, send_bytes, world(recv_peer), recv_data, recv_bytes,
                  deadline);
}

void LevelTrace::begin_group(const std::vector<int>& members) {
  members_ = &members;
  offset_ = next_;
}

void LevelTrace::record(const AlgoStep& step, const void* data) {
  MDDP_CHECK(members_ != nullptr, "LevelTrace: begin_group was not called");
  AlgoStep s = step;
  const auto world = [&](int g) { return g < 0 ? g : (*members_)[static_cast<std::size_t>(g)]; };
  s.send_peer = world(step.send_peer);
  s.recv_peer = world(step.recv_peer);
  s.level = level_;
  const auto p = static_cast<std::size_t>(step.phase);
  s.index = offset_[p] + step.index;
  next_[p] = std::max(next_[p], s.index + 1);
  parent_->record(s, data);
}

}  // namespace mddp::comm
