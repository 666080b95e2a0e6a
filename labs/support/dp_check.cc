#include "labs/support/dp_check.h"

#include <unistd.h>

namespace mddp::labs {

DpRank::DpRank(int rank, int world, comm::TransportKind kind,
               std::unique_ptr<comm::Communicator> comm, CaseLog& log)
    : rank_(rank),
      world_(world),
      kind_(kind),
      comm_(std::move(comm)),
      group_(std::make_unique<WatchedGroup>(*comm_)),
      log_(log) {}

bool DpRank::run(const std::string& what, const std::function<CaseResult()>& fn) {
  return log_.run(str(what, ", ", group_name(world_, kind_)), fn, [this] {
    // Destroying the communicator closes this rank's connections, so peers
    // waiting on it fail now rather than at their deadline.
    group_.reset();
    comm_.reset();
  });
}

bool check_dp_groups(const CheckOptions& o, Report& report,
                     const std::function<void(DpRank&)>& body) {
  for (int world : o.world_sizes) {
    for (comm::TransportKind kind : o.transports) {
      const auto ranks = run_group(
          world,
          [&](int r, comm::Store& store) {
            const comm::JobIdentity job{str("lab-", ::getppid()), ""};
            auto comm = comm::connect(store, r, world, job, kind,
                                      comm::CommOptions{comm::Algorithm::kAuto, o.timeout});
            CaseLog log(r, world, store, o.timeout + std::chrono::seconds(5));
            DpRank rank(r, world, kind, std::move(comm), log);
            body(rank);
            return log.finding();
          },
          o.timeout * 30 + std::chrono::seconds(60));
      if (const RankFinding* worst = worst_finding(ranks)) {
        report.fail(worst->failed_case.empty() ? worst->message
                                               : worst->failed_case + ": " + worst->message,
                    worst->details);
        return false;
      }
      report.passed(group_name(world, kind), ranks[0].cases);
    }
  }
  return true;
}

}  // namespace mddp::labs
