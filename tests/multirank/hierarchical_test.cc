// The hierarchical all-reduce on emulated hosts: thread-ranks given host
// identities of their own (connect_as_host), so one process holds several
// "hosts", each with its own shared-memory transport and TCP between them.
// Every layout (even, uneven, one rank per host, one host, hosts whose
// ranks are interleaved) x op x type x count against the independent
// reference of harness.h; the levels and peers of the recorded steps; the
// cross-host bytes against the spec's formula, computed here; and what
// `auto` picks. The same over real processes in network namespaces:
// tests/fault/netns_hier_test.sh.
#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <numeric>

#include "core/comm/algorithms/algorithms.h"
#include "core/comm/transport/connect.h"
#include "tests/multirank/harness.h"

namespace mddp::comm::test {
namespace {

// hosts[r]: rank r's host name. Runs fn on every rank with a Communicator
// made by connect_as_host (kAuto transport: tcp across hosts).
void with_hosts(const std::vector<std::string>& hosts, Algorithm algorithm,
                const std::function<void(Communicator&)>& fn) {
  MemoryStore store;
  const int n = static_cast<int>(hosts.size());
  // spdlog's registry is made on first use; made here, before the ranks'
  // threads log (connect_as_host), ThreadSanitizer sees it published to
  // them (libspdlog itself is not instrumented, so a race on its lazy
  // construction would be reported).
  spdlog::default_logger();
  mddp::test::run_threads(
      n,
      [&](int rank) {
        auto comm = connect_as_host(store, rank, n, kJob, TransportKind::kAuto, {algorithm, 20s},
                                    hosts[static_cast<std::size_t>(rank)]);
        fn(*comm);
      },
      120s);
}

// "2+3" -> hosts a a b b b (ranks contiguous per host).
std::vector<std::string> layout(const std::vector<int>& ranks_per_host) {
  std::vector<std::string> hosts;
  for (std::size_t h = 0; h < ranks_per_host.size(); ++h)
    hosts.insert(hosts.end(), static_cast<std::size_t>(ranks_per_host[h]),
                 std::string(1, static_cast<char>('a' + h)));
  return hosts;
}

std::string describe(const std::vector<std::string>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += h;
  return s;
}

struct Layout {
  std::vector<std::string> hosts;
};
// Names the parameter in test names and failures ("aabbb"), not its bytes.
void PrintTo(const Layout& l, std::ostream* os) {
  *os << describe(l.hosts);
}

std::vector<Layout> layouts() {
  return {{layout({2, 2})},
          {layout({2, 2, 2})},
          {layout({2, 3})},
          {layout({3, 2})},
          {layout({1, 3})},
          {layout({3, 1, 2})},
          {layout({4})},
          {layout({1, 1, 1})},
          {{"a", "b", "a",
            "b"}},  // interleaved: the topology comes from the identities, not the rank order
          {{"b", "a", "a", "c", "b", "a"}}};
}

class HierarchicalTest : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchicalTest, MatchesTheReferenceForEveryOpTypeAndCount) {
  const auto& hosts = GetParam().hosts;
  const int n = static_cast<int>(hosts.size());
  with_hosts(hosts, Algorithm::kHierarchical, [&](Communicator& c) {
    for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        if (t != DataType::kFloat32 && op != ReduceOp::kSum && op != ReduceOp::kAvg) continue;
        for (int64_t count :
             {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{7}, int64_t{1000}, int64_t{300007}}) {
          Buffer b = make_input(t, count, c.rank());
          c.all_reduce(b.data(), count, t, op, Algorithm::kHierarchical)->wait();
          EXPECT_TRUE(matches(b, 0, count, Expected(t, op, n)))
              << "rank " << c.rank() << " " << to_string(t) << " " << to_string(op) << " count "
              << count;
        }
      }
  });
}

// Host reduce-scatter, cross-host steps, host all-gather, in that order;
// host steps talk only within the host and cross-host steps only across.
TEST_P(HierarchicalTest, StepsRunWithinHostsThenAcrossThenWithin) {
  const auto& hosts = GetParam().hosts;
  with_hosts(hosts, Algorithm::kHierarchical, [&](Communicator& c) {
    const int r = c.rank();
    const HostTopology& topo = c.topology();
    std::vector<float> data(1000, 1.0f);
    auto work = c.all_reduce(data.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
    work->wait();
    const int local = topo.local_size(r);
    int stage = 0;  // 0 host reduce-scatter, 1 cross-host, 2 host all-gather
    int host_rs = 0, host_ag = 0, cross = 0;
    for (const AlgoStep& s : work->steps()) {
      const int peer = s.send_peer >= 0 ? s.send_peer : s.recv_peer;
      ASSERT_GE(peer, 0);
      if (s.level == StepLevel::kHost) {
        EXPECT_EQ(topo.host_of(peer), topo.host_of(r))
            << "rank " << r << ": a host step to rank " << peer;
        const int want = s.phase == StepPhase::kReduceScatter ? 0 : 2;
        EXPECT_GE(want, stage) << "rank " << r << ": " << phase_name(s) << " out of order";
        stage = want;
        (s.phase == StepPhase::kReduceScatter ? host_rs : host_ag)++;
      } else {
        EXPECT_EQ(s.level, StepLevel::kCrossHost);
        EXPECT_NE(topo.host_of(peer), topo.host_of(r))
            << "rank " << r << ": a cross-host step to rank " << peer;
        EXPECT_LE(stage, 1) << "rank " << r << ": a cross-host step after the host all-gather";
        stage = 1;
        ++cross;
      }
    }
    EXPECT_EQ(host_rs, local - 1) << "rank " << r;
    EXPECT_EQ(host_ag, local - 1) << "rank " << r;
    if (topo.host_count() == 1) {
      EXPECT_EQ(cross, 0);
    }
  });
}

// The bytes that cross hosts, summed over every rank's recorded steps,
// against the spec: each piece's ring over H hosts sends (H-1) times the
// piece in its reduce-scatter and again in its all-gather, so 2(H-1)S in
// all (H <= 3 here, where a piece sent by recursive doubling, which auto
// picks for small pieces, crosses as often: 2 at H = 2, 4 = fold-in +
// exchange + send-back at H = 3). The flat ring with
// each host's ranks adjacent crosses hosts on H of its n links, each
// carrying 2(n-1)/n S (to within one element per block for uneven blocks).
TEST_P(HierarchicalTest, CrossHostBytesMatchTheFormula) {
  const auto& hosts = GetParam().hosts;
  const int n = static_cast<int>(hosts.size());
  constexpr int64_t kCount = 12 * 1000;  // divisible by every n here: no rounding
  const int64_t S = kCount * 4;
  std::mutex mu;
  std::map<Algorithm, int64_t> crossed;
  int host_count = 0;
  bool contiguous = true;
  for (int r = 1; r < n; ++r)
    for (int q = 0; q + 1 < r; ++q)
      if (hosts[static_cast<std::size_t>(q)] == hosts[static_cast<std::size_t>(r)] &&
          hosts[static_cast<std::size_t>(r - 1)] != hosts[static_cast<std::size_t>(r)])
        contiguous = false;
  with_hosts(hosts, Algorithm::kAuto, [&](Communicator& c) {
    {
      std::lock_guard lock(mu);  // every rank writes it (the same value)
      host_count = c.topology().host_count();
    }
    for (Algorithm a : {Algorithm::kHierarchical, Algorithm::kRing}) {
      std::vector<float> data(kCount, 1.0f);
      auto work = c.all_reduce(data.data(), kCount, DataType::kFloat32, ReduceOp::kSum, a);
      work->wait();
      int64_t sent = 0;
      for (const AlgoStep& s : work->steps())
        if (s.send_peer >= 0 && c.topology().host_of(s.send_peer) != c.topology().host_of(c.rank()))
          sent += s.send_bytes;
      std::lock_guard lock(mu);
      crossed[a] += sent;
    }
  });
  const int64_t H = host_count;
  EXPECT_EQ(crossed[Algorithm::kHierarchical], 2 * (H - 1) * S) << describe(hosts);
  if (contiguous && H > 1) {
    EXPECT_EQ(crossed[Algorithm::kRing], H * 2 * (n - 1) * S / n) << describe(hosts);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalTest, ::testing::ValuesIn(layouts()),
                         [](const auto& info) { return describe(info.param.hosts); });

// `auto` is hierarchical exactly on several hosts with several ranks on one;
// elsewhere the flat rule's choice.
TEST(HierarchicalAuto, PicksHierarchicalOnlyWhereHostsShareRanks) {
  for (const auto& [layout_hosts, hierarchical] :
       std::vector<std::pair<std::vector<std::string>, bool>>{{layout({2, 2}), true},
                                                              {layout({1, 2}), true},
                                                              {layout({3}), false},
                                                              {layout({1, 1, 1}), false}}) {
    const auto& hosts = layout_hosts;  // (not the binding: clang 14 cannot capture one)
    const bool want = hierarchical;
    with_hosts(hosts, Algorithm::kAuto, [&](Communicator& c) {
      float x = 1;
      c.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum)->wait();
      const std::string flat =
          str("all_reduce(", to_string(choose_all_reduce_algorithm(4, c.size())), ")");
      EXPECT_EQ(c.history().back().op, want ? "all_reduce(hierarchical)" : flat) << describe(hosts);
    });
  }
}

// A communicator made without the topology cannot run it, and says how to get it.
TEST(HierarchicalAuto, WithoutTheTopologyItIsRefusedWithTheFix) {
  MemoryStore store;
  mddp::test::run_threads(
      2,
      [&](int rank) {
        Communicator c(connect_transport(store, rank, 2, kJob, TransportKind::kTcp, 20s),
                       CommOptions{});
        float x = 1;
        try {
          c.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum, Algorithm::kHierarchical);
          ADD_FAILURE() << "rank " << rank << ": accepted without a topology";
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("make the communicator with connect()"),
                    std::string::npos)
              << e.what();
        }
        c.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum)
            ->wait();  // auto: the flat ring, as before
        EXPECT_EQ(x, 2.0f);
      },
      60s);
}

// The pieces of an uneven layout: the union of the hosts' block boundaries,
// each with the rank owning it on every host.
TEST(HostPieces, AreTheCommonRefinementOfTheHostsBlocks) {
  const HostTopology t = HostTopology::from_identities({"a", "a", "b", "b", "b"});
  const auto pieces = host_pieces(t, 12);  // a: [0,6) [6,12); b: [0,4) [4,8) [8,12)
  ASSERT_EQ(pieces.size(), 4u);
  const std::vector<std::tuple<int64_t, int64_t, std::vector<int>>> want{
      {0, 4, {0, 2}}, {4, 2, {0, 3}}, {6, 2, {1, 3}}, {8, 4, {1, 4}}};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(pieces[i].begin, std::get<0>(want[i])) << i;
    EXPECT_EQ(pieces[i].count, std::get<1>(want[i])) << i;
    EXPECT_EQ(pieces[i].owners, std::get<2>(want[i])) << i;
  }
  EXPECT_EQ(host_pieces(t, 0).size(), 0u);
  const auto one = host_pieces(t, 1);  // only block 0 of each host is non-empty
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].owners, (std::vector<int>{0, 2}));
}

TEST(HostTopology, GroupsRanksByIdentityInOrderOfTheirLowestRank) {
  const HostTopology t = HostTopology::from_identities({"y", "x", "y", "z", "x"});
  ASSERT_EQ(t.host_count(), 3);
  EXPECT_EQ(t.ranks_of(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(t.ranks_of(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(t.ranks_of(2), (std::vector<int>{3}));
  EXPECT_EQ(t.local_rank(4), 1);
  EXPECT_EQ(t.local_size(3), 1);
  EXPECT_TRUE(t.multi_host_multi_rank());
  EXPECT_EQ(t.describe(), "3 hosts: 2+2+1 ranks");
  EXPECT_FALSE(HostTopology::from_identities({"a", "b"}).multi_host_multi_rank());
  EXPECT_TRUE(HostTopology::from_identities({"a", "a"}).single_host());
}

}  // namespace
}  // namespace mddp::comm::test
