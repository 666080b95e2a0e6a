// What both transports (tcp/, shm/) do with the frames of one exchange that
// have not finished: refuse to start on a peer stream an earlier call broke,
// and, once the deadline passes, throw a TimeoutError naming every pending
// frame. A transport describes an op's peer stream with a PeerLink.
#pragma once

#include <string>

#include "core/comm/types.h"
#include "core/common/check.h"

namespace mddp::comm {

// The peer stream a frame travels on.
struct PeerLink {
  int rank;             // the peer's rank
  std::string& broken;  // why the stream is unusable for good; "" while it works
  const PeerFault& broken_fault;
};

// Throws the PeerError an earlier call left on any op's stream.
template <typename Op, typename LinkOf>
void refuse_broken_links(Op* ops, int count, LinkOf link_of) {
  for (int i = 0; i < count; ++i) {
    const PeerLink link = link_of(ops[i]);
    if (!link.broken.empty())
      throw PeerError(link.broken + " (an earlier call failed)", link.rank, link.broken_fault);
  }
}

// The deadline passed after `waited`: names each unfinished frame (direction,
// size, bytes done, peer) and throws. A frame cut short after its header
// leaves its stream out of step for good, so that stream is marked broken.
template <typename Op, typename LinkOf>
[[noreturn]] void throw_frames_timed_out(int rank, Clock::duration waited, Op* ops, int count,
                                         LinkOf link_of) {
  std::string pending;
  for (int i = 0; i < count; ++i)
    if (!ops[i].finished)
      pending += str(pending.empty() ? "" : " and ", ops[i].sending ? "sending " : "receiving ",
                     ops[i].bytes, " bytes ", ops[i].sending ? "to" : "from", " rank ",
                     link_of(ops[i]).rank, " (", ops[i].done, " done)");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
  const std::string what = str("rank ", rank, ": timed out after ", ms, " ms ", pending,
                               "; is that rank alive, and running the same collective?");
  for (int i = 0; i < count; ++i)
    if (!ops[i].finished && ops[i].header_done > 0)
      link_of(ops[i]).broken = what + " (the frame was cut short)";
  throw TimeoutError(what);
}

}  // namespace mddp::comm
