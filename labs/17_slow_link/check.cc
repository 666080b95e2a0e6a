// Lab 17's checker: the student's reading of a job with one slow link
// (my_work/slow_link.toml) against the link `microddp lab run slow_link`
// slowed, and the bandwidth against the busbw `microddp analyze` reads from
// the run (what the student can see: the planted rate is hidden, and the
// kernel's pacing only approximates it).
#include "core/common/check.h"

#include <cmath>
#include <regex>
#include <set>

#include "labs/checks.h"
#include "labs/support/diagnosis.h"

namespace mddp::labs {
namespace {

// "1-2", "1 2", "rank 1 -> rank 2": the two ranks named; empty when not two.
std::set<int64_t> link_ends(const std::string& text) {
  static const std::regex two(R"(^\D*(\d+)\D+(\d+)\D*$)");
  std::smatch m;
  if (!std::regex_match(text, m, two)) return {};
  return {std::stoll(m[1]), std::stoll(m[2])};
}

Grading grade_link(const DiagnosisCase& c, const perf::Analysis& an) {
  const auto text = c.text("link");
  if (!text) return not_answered("link");
  const std::set<int64_t> named = link_ends(*text);
  if (named.size() != 2)
    return {str("'", *text, "' does not name two ranks: write the two ends, as \"1-2\""), {}};
  const std::set<int64_t> slow{c.fault.rank, c.fault.peer};
  if (named == slow) return {};
  Grading g{str("the link between ranks ", *named.begin(), " and ", *named.rbegin(),
                " is not the slow one"),
            {}};
  const auto late = an.stragglers.worst;
  if (late && named.count(late->rank) && !named.count(c.fault.rank))
    g.details.push_back(
        str("rank ", late->rank,
            " is late at the first all-reduce because it waits for the bytes coming in to it: "
            "the slow link is the one into the late rank, not out of it"));
  g.details.push_back(
      "in a ring every rank waits as long as the slowest link takes, so no rank's wait names it; "
      "analyze's links table (and the dashboard's Collectives caption) rates each link by the "
      "time its receiver waited on its bytes");
  return g;
}

// Within a fifth of `want`: an estimate, but not the algorithm bandwidth,
// which is a third below busbw on 4 ranks.
bool near(double got, double want) {
  return want > 0 && std::abs(got - want) <= 0.2 * want;
}

Grading grade_bandwidth(const DiagnosisCase& c, const perf::Analysis& an) {
  const auto mbps = c.number("mbps");
  if (!mbps) return not_answered("mbps");
  const double busbw = an.buckets.empty() ? 0 : an.buckets.front().busbw_gbps * 1e3;
  if (near(*mbps, busbw)) return {};
  Grading g{str(*mbps, " MB/s is not the slow link's bandwidth"), {}};
  const int n = an.config.world_size;
  const double algbw = busbw * n / (2.0 * (n - 1));
  if (near(*mbps * 1e3, busbw))
    g.details.push_back("that is the figure in GB/s: the question asks MB/s");
  else if (near(*mbps, algbw))
    g.details.push_back(str(
        "that is the algorithm bandwidth (bytes / time). A ring all-reduce moves 2(n-1)/n of the "
        "buffer over every link, so busbw, algbw x ",
        2.0 * (n - 1) / n, ", is what each link carried: the slowest link's rate"));
  else if (!an.links.empty() && near(*mbps, an.links.back().gbps() * 1e3))
    g.details.push_back("that is the rate of a fast link, not of the slow one");
  g.details.push_back(
      "the all-reduce runs no faster than its slowest link: the busbw of analyze's all-reduces "
      "table (and of the dashboard's bandwidth chart) is that link's rate");
  return g;
}

}  // namespace

void check_slow_link(const Implementations&, const CheckOptions& o, Report& report) {
  const auto c = open_case("slow_link", o, report);
  if (!c) return;
  const auto an = analyze_case(*c, report);
  if (!an) return;
  Grading g = grade_link(*c, *an);
  if (g.wrong.empty()) g = grade_bandwidth(*c, *an);
  const PlantedFault& f = c->fault;
  report_diagnosis(
      g,
      {str("the TCP connection between ranks ", f.rank, " and ", f.peer, " carried at most ",
           f.mbps,
           " MB/s each way: the kernel paced both ends' sends, as a slow cable or a "
           "congested switch port would."),
       str("The ring sends rank ", f.rank, "'s blocks to rank ", f.peer,
           " over it in every step, and each step waits for its slowest transfer: every rank's "
           "all-reduce took as long as that link needed, so none of them looked slower than the "
           "others."),
       "What singles it out is where the time goes: each link's bytes over the time its receiver "
       "waited on them. The busbw of the whole all-reduce is the slowest link's rate."},
      2, report);
}

}  // namespace mddp::labs
