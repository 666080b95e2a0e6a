#include "core/perf/collectives.h"

#include <algorithm>
#include <limits>
#include <map>

#include "core/comm/algo_step.h"
#include "core/perf/analysis.h"
#include "core/perf/timeline.h"

namespace mddp::perf {
namespace {

// Steps sort in the order the algorithms run them: a reduce-scatter before
// its all-gather, a reduce before its broadcast; the hierarchical
// all-reduce's host reduce-scatter before its cross-host steps, and those
// before its host all-gather.
int phase_order(comm::StepPhase p) {
  switch (p) {
    case comm::StepPhase::kReduceScatter:
      return 0;
    case comm::StepPhase::kAllGather:
      return 1;
    case comm::StepPhase::kReduce:
      return 2;
    case comm::StepPhase::kBroadcast:
      return 3;
  }
  return 4;
}
int step_order(const comm::AlgoStep& a) {
  const int stage =
      a.level == comm::StepLevel::kHost ? (a.phase == comm::StepPhase::kAllGather ? 2 : 0) : 1;
  return stage * 8 + phase_order(a.phase);
}

}  // namespace

StepCollectives build_collectives(const std::vector<StepMetrics>& step_records, int world_size,
                                  const std::string& algorithm, const std::optional<LinkFit>& fit) {
  StepCollectives out;
  out.world_size = world_size;
  out.fit = fit;
  if (step_records.empty()) return out;
  out.step = step_records.front().step;
  out.origin_unix_ns = step_records.front().start_ns + step_records.front().clock_offset_ns;
  for (const auto& m : step_records)
    out.origin_unix_ns = std::min(out.origin_unix_ns, m.start_ns + m.clock_offset_ns);

  // bucket -> (phase order, index) -> the step across ranks
  std::map<int, CollectiveView> views;
  std::map<int, std::map<std::pair<int, int>, CollectiveStep>> steps;
  for (const auto& m : step_records) {
    const auto ms = [&](int64_t ns) {
      return ns_to_ms_since(ns + m.clock_offset_ns, out.origin_unix_ns);
    };
    for (const comm::CommSpan& b : m.buckets) {
      if (b.steps.empty()) continue;
      auto [it, fresh] = views.try_emplace(b.index);
      CollectiveView& v = it->second;
      if (fresh) {
        v.bucket = b.index;
        v.bytes = b.bytes;
        v.algorithm = resolve_algorithm(algorithm, b.bytes, world_size);
        v.start_ms = ms(b.start_ns);
        v.end_ms = ms(b.end_ns);
      }
      // Where `auto` chose by topology or by buffer, the steps say what ran.
      if (const std::string ran = comm::algorithm_of(b.steps); !ran.empty()) v.algorithm = ran;
      v.start_ms = std::min(v.start_ms, ms(b.start_ns));
      v.end_ms = std::max(v.end_ms, ms(b.end_ns));
      for (const comm::AlgoStep& a : b.steps) {
        CollectiveStep& s = steps[b.index][{step_order(a), a.index}];
        s.phase = comm::phase_name(a);
        s.index = a.index;
        s.transfers.push_back({m.rank, a.send_peer, a.send_block, a.recv_peer, a.recv_block,
                               a.send_bytes, a.recv_bytes, ms(a.start_ns), ms(a.end_ns)});
      }
    }
  }
  for (auto& [index, v] : views) {
    for (auto& [key, s] : steps[index]) {
      std::sort(s.transfers.begin(), s.transfers.end(),
                [](const Transfer& a, const Transfer& b) { return a.rank < b.rank; });
      if (fit) {
        int64_t largest = 0;
        for (const Transfer& t : s.transfers)
          largest = std::max({largest, t.send_bytes, t.recv_bytes});
        s.predicted_ms =
            (fit->link.alpha_s + static_cast<double>(largest) / fit->link.beta_Bps) * 1e3;
      }
      v.steps.push_back(std::move(s));
    }
    if (fit &&
        v.algorithm != "hierarchical")  // its two levels need two links: no one-fit prediction
      v.predicted_ms =
          allreduce_seconds(v.algorithm, static_cast<double>(v.bytes), world_size, fit->link) * 1e3;
    out.collectives.push_back(std::move(v));
  }
  return out;
}

// Note [Link rate]. A transfer's bytes cannot start on their way before the
// sender began its step, nor be taken before the receiver began its own;
// they are all in when the receiver's step ends. So the receiver waited on
// the link from the later of the two starts to its end: on a slow link that
// is the bytes' time on the wire, on a fast one next to nothing. Summed per
// (from, to) over many steps, bytes / wait is the link's rate as the
// algorithm saw it. (A sender blocked on a full socket buffer makes its own
// step end late, so the link into it looks slow as well: the slower of the
// two is the cause. Small buckets never fill the buffer.) The direct
// all-reduce has no link: its ranks read and write each other's memory,
// and its steps' times are the reduction's, so it has no rate here.
void add_link_rates(const StepCollectives& c, std::vector<LinkRate>& links) {
  std::map<std::pair<int, int>, LinkRate> by_pair;
  for (LinkRate& l : links) by_pair[{l.from, l.to}] = l;
  for (const CollectiveView& v : c.collectives) {
    if (v.algorithm == "direct") continue;
    for (const CollectiveStep& s : v.steps)
      for (const Transfer& t : s.transfers) {
        if (t.from < 0 || t.recv_bytes == 0) continue;
        const auto sender = std::find_if(s.transfers.begin(), s.transfers.end(),
                                         [&](const Transfer& x) { return x.rank == t.from; });
        if (sender == s.transfers.end()) continue;
        LinkRate& l = by_pair[{t.from, t.rank}];
        l.from = t.from;
        l.to = t.rank;
        l.bytes += t.recv_bytes;
        l.wait_ms += std::max(0.0, t.end_ms - std::max(t.start_ms, sender->start_ms));
        ++l.transfers;
      }
  }
  links.clear();
  for (auto& [pair, l] : by_pair) links.push_back(l);
}

void sort_slowest_first(std::vector<LinkRate>& links) {
  const auto key = [](const LinkRate& l) {
    return l.gbps() > 0 ? l.gbps() : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(links.begin(), links.end(),
                   [&](const LinkRate& a, const LinkRate& b) { return key(a) < key(b); });
}

nlohmann::json to_json(const std::vector<LinkRate>& links) {
  nlohmann::json out = nlohmann::json::array();
  for (const LinkRate& l : links)
    out.push_back({{"from", l.from},
                   {"to", l.to},
                   {"bytes", l.bytes},
                   {"wait_ms", l.wait_ms},
                   {"transfers", l.transfers},
                   {"gbps", l.gbps() > 0 ? nlohmann::json(l.gbps()) : nlohmann::json()}});
  return out;
}

namespace {

nlohmann::json steps_json(const CollectiveView& v, bool predicted) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : v.steps) {
    nlohmann::json transfers = nlohmann::json::array();
    for (const auto& t : s.transfers)
      transfers.push_back({{"rank", t.rank},
                           {"to", t.to},
                           {"send_block", t.send_block},
                           {"from", t.from},
                           {"recv_block", t.recv_block},
                           {"send_bytes", t.send_bytes},
                           {"recv_bytes", t.recv_bytes},
                           {"start_ms", t.start_ms},
                           {"end_ms", t.end_ms}});
    steps.push_back(
        {{"phase", s.phase},
         {"index", s.index},
         {"transfers", std::move(transfers)},
         {"predicted_ms", predicted ? nlohmann::json(s.predicted_ms) : nlohmann::json()}});
  }
  return steps;
}

}  // namespace

nlohmann::json to_json(const StepCollectives& c, int bucket) {
  const bool predicted = c.fit.has_value();
  nlohmann::json buckets = nlohmann::json::array();
  const CollectiveView* chosen = nullptr;
  for (const auto& v : c.collectives) {
    buckets.push_back(
        {{"bucket", v.bucket},
         {"bytes", v.bytes},
         {"algorithm", v.algorithm},
         {"start_ms", v.start_ms},
         {"end_ms", v.end_ms},
         {"predicted_ms", predicted ? nlohmann::json(v.predicted_ms) : nlohmann::json()},
         {"steps", v.steps.size()}});
    if (bucket >= 0 ? v.bucket == bucket : (!chosen || v.bytes > chosen->bytes)) chosen = &v;
  }
  nlohmann::json collective;
  if (chosen) {
    collective = buckets[static_cast<std::size_t>(chosen - c.collectives.data())];
    collective["steps"] = steps_json(*chosen, predicted);
  }
  nlohmann::json fit;
  if (c.fit)
    fit = {{"transport", c.fit->transport},    {"algorithm", c.fit->algorithm},
           {"world_size", c.fit->world_size},  {"alpha_s", c.fit->link.alpha_s},
           {"beta_Bps", c.fit->link.beta_Bps}, {"r2", c.fit->r2}};
  std::vector<LinkRate> links;
  add_link_rates(c, links);
  sort_slowest_first(links);
  return {{"step", c.step},
          {"world_size", c.world_size},
          {"origin_unix_ns", c.origin_unix_ns},
          {"fit", fit},
          {"buckets", std::move(buckets)},
          {"collective", std::move(collective)},
          {"links", to_json(links)}};
}

}  // namespace mddp::perf
