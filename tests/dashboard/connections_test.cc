// Connections without sockets: who gives way when a new client needs room.
#include "dashboard/server/connections.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace mddp::dashboard::test {
namespace {

using State = Connections::State;

// Registers `n` connections from `address` in `state`; each records its id
// in `closed` when it is closed.
std::vector<uint64_t> open(Connections& c, const std::string& address, int n, State state,
                           std::vector<uint64_t>& closed) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) {
    auto id = std::make_shared<uint64_t>();
    *id = c.add(address, state, [&closed, id] { closed.push_back(*id); });
    ids.push_back(*id);
  }
  return ids;
}

TEST(Connections, AnAddressAtItsBoundGivesUpItsLongestIdle) {
  Connections c;
  std::vector<uint64_t> closed;
  auto ids = open(c, "a", Connections::kMaxPerAddress, State::kIdle, closed);
  c.set_state(ids[0], State::kBusy);  // answering: never closed to make room
  c.set_state(ids[2], State::kBusy);
  c.set_state(ids[2], State::kIdle);  // idle again, since now
  EXPECT_TRUE(c.make_room("a"));
  EXPECT_EQ(closed, std::vector<uint64_t>{ids[1]});
  EXPECT_EQ(c.from("a"), Connections::kMaxPerAddress - 1);
  EXPECT_TRUE(c.make_room("b")) << "another address is not bound by a's connections";
  EXPECT_EQ(closed.size(), 1u);
}

TEST(Connections, StreamsGiveWayOnlyWhenNothingIsIdle) {
  Connections c;
  std::vector<uint64_t> closed;
  auto streams = open(c, "a", 2, State::kStream, closed);
  open(c, "a", Connections::kMaxPerAddress - 3, State::kBusy, closed);
  auto idle = open(c, "a", 1, State::kIdle, closed);
  EXPECT_TRUE(c.make_room("a"));
  EXPECT_EQ(closed, std::vector<uint64_t>{idle[0]});
  c.add("a", State::kBusy, [] {});
  EXPECT_TRUE(c.make_room("a"));
  EXPECT_EQ(closed.back(), streams[0]) << "the oldest stream (the page reconnects it)";
}

TEST(Connections, OnlyBusyConnectionsMeansNoRoom) {
  Connections c;
  std::vector<uint64_t> closed;
  open(c, "a", Connections::kMaxPerAddress, State::kBusy, closed);
  EXPECT_FALSE(c.make_room("a"));
  EXPECT_TRUE(closed.empty());
}

TEST(Connections, AFullServerTakesFromTheAddressHoldingTheMost) {
  Connections c;
  std::vector<uint64_t> closed;
  auto a = open(c, "a", 100, State::kIdle, closed);
  auto b = open(c, "b", Connections::kMax - 100, State::kIdle, closed);
  ASSERT_EQ(c.size(), Connections::kMax);
  EXPECT_TRUE(c.make_room("c"));
  EXPECT_EQ(closed, std::vector<uint64_t>{b[0]}) << "b holds the most";
  c.remove(b[0]);  // the session's own remove after the close: a no-op
  EXPECT_EQ(c.size(), Connections::kMax - 1);
}

TEST(Connections, CloseAllClosesEveryOne) {
  Connections c;
  std::vector<uint64_t> closed;
  open(c, "a", 3, State::kIdle, closed);
  open(c, "b", 2, State::kStream, closed);
  c.close_all();
  EXPECT_EQ(closed.size(), 5u);
}

}  // namespace
}  // namespace mddp::dashboard::test
