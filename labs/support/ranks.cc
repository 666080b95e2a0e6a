#include "labs/support/ranks.h"

#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/comm/file_store.h"
#include "core/comm/fork_ranks.h"
#include "core/comm/types.h"
#include "core/common/temp_dir.h"
#include "labs/todo.h"

namespace mddp::labs {
namespace {

const char* problem_name(Problem p) {
  switch (p) {
    case Problem::kNone:
      return "none";
    case Problem::kTodo:
      return "todo";
    case Problem::kCrash:
      return "crash";
    case Problem::kWrong:
      return "wrong";
    case Problem::kException:
      return "exception";
    case Problem::kComm:
      return "comm";
  }
  return "none";
}

Problem problem_of(const std::string& s) {
  for (Problem p :
       {Problem::kTodo, Problem::kCrash, Problem::kWrong, Problem::kException, Problem::kComm})
    if (s == problem_name(p)) return p;
  return Problem::kNone;
}

nlohmann::json to_json(const RankFinding& f) {
  return {{"rank", f.rank},        {"cases", f.cases},     {"problem", problem_name(f.problem)},
          {"case", f.failed_case}, {"message", f.message}, {"details", f.details},
          {"evidence", f.evidence}};
}

RankFinding from_json(const nlohmann::json& j) {
  RankFinding f;
  f.rank = j.at("rank").get<int>();
  f.cases = j.at("cases").get<int64_t>();
  f.problem = problem_of(j.at("problem").get<std::string>());
  f.failed_case = j.at("case").get<std::string>();
  f.message = j.at("message").get<std::string>();
  f.details = j.at("details").get<std::vector<std::string>>();
  f.evidence = j.at("evidence");
  return f;
}

// Where a finding file of rank r goes.
std::string finding_path(const std::string& dir, int r) {
  return dir + "/finding-" + std::to_string(r) + ".json";
}

}  // namespace

Guarded run_guarded(const std::function<CaseResult()>& fn) {
  Guarded g;
  try {
    g.result = fn();
    if (!g.result.message.empty()) g.problem = Problem::kWrong;
  } catch (const LabTodo& e) {
    g.problem = Problem::kTodo;
    g.result.message = str("not written yet: ", e.what());
  } catch (const comm::CommError& e) {
    g.problem = Problem::kComm;
    g.result.message = e.what();
  } catch (const std::exception& e) {
    g.problem = Problem::kException;
    g.result.message = str("your code threw: ", e.what());
  }
  return g;
}

CaseLog::CaseLog(int rank, int size, comm::Store& store, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), store_(store), timeout_(timeout) {
  finding_.rank = rank;
}

bool CaseLog::run(const std::string& name, const std::function<CaseResult()>& fn,
                  const std::function<void()>& teardown,
                  const std::function<nlohmann::json()>& evidence) {
  const std::string key = "case/" + std::to_string(index_++) + "/";
  const auto [problem, result] = run_guarded(fn);
  const bool mine_ok = problem == Problem::kNone;
  finding_.evidence = evidence ? evidence() : result.evidence;
  if (!mine_ok) {
    finding_.problem = problem;
    finding_.failed_case = name;
    finding_.message = result.message;
    finding_.details = result.details;
    teardown();
  }
  store_.set(key + std::to_string(rank_), mine_ok ? "ok" : "fail");
  bool all_ok = mine_ok;
  for (int q = 0; q < size_ && all_ok; ++q) {
    if (q == rank_) continue;
    try {
      all_ok = store_.get(key + std::to_string(q), timeout_) == "ok";
    } catch (const comm::TimeoutError&) {
      all_ok = false;  // that rank is stuck: it reports for itself
    }
  }
  if (mine_ok && all_ok) ++finding_.cases;
  return all_ok;
}

namespace {

// What is known of rank r that left no finding: how its process ended.
RankFinding crash_finding(int r, const comm::RankExit& exit, std::chrono::milliseconds limit) {
  RankFinding f;
  f.rank = r;
  f.problem = Problem::kCrash;
  if (exit.timed_out || exit.signal == SIGKILL) {
    f.message = str("rank ", r, " was still running after ", limit.count() / 1000,
                    " s and was killed (an endless loop?)");
  } else if (exit.signal != 0) {
    f.message = str("rank ", r, " crashed: ", strsignal(exit.signal),
                    exit.signal == SIGSEGV ? " (a read or write outside a buffer?)" : "");
  } else {
    f.message = str("rank ", r, " exited (code ", exit.exit_code, ") in the middle of the check");
  }
  return f;
}

}  // namespace

std::vector<RankFinding> run_group(
    int n, const std::function<RankFinding(int rank, comm::Store& store)>& fn,
    std::chrono::milliseconds limit) {
  const std::string dir = make_temp_dir("microddp-lab");
  std::filesystem::create_directories(dir + "/store");
  // Past `limit` what is left is killed (every wait inside has its own,
  // shorter deadline, so this only catches a rank stuck in a student's loop).
  const comm::ForkResult result =
      comm::fork_ranks(n,
                       [&](int r) {
                         RankFinding f;
                         f.rank = r;
                         try {
                           comm::FileStore store(dir + "/store");
                           f = fn(r, store);
                         } catch (const std::exception& e) {
                           f.problem = Problem::kException;
                           f.message = str("the checker failed on this rank: ", e.what());
                         }
                         std::ofstream(finding_path(dir, r)) << to_json(f).dump();
                         return 0;
                       },
                       {.limit = limit});
  std::vector<RankFinding> out;
  for (int r = 0; r < n; ++r) {
    std::ifstream in(finding_path(dir, r));
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_object())
      out.push_back(from_json(j));
    else
      out.push_back(crash_finding(r, result.ranks[static_cast<std::size_t>(r)], limit));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

std::optional<std::vector<RankFinding>> run_timing(
    int n, const std::function<RankFinding(int rank, comm::Store& store)>& fn,
    std::chrono::milliseconds limit, Report& report) {
  auto ranks = run_group(n, fn, limit);
  if (const RankFinding* bad = worst_finding(ranks)) {
    report.note(str("speed: not measured: rank ", bad->rank, ": ", bad->message));
    return std::nullopt;
  }
  return ranks;
}

const RankFinding* worst_finding(const std::vector<RankFinding>& ranks) {
  const RankFinding* worst = nullptr;
  for (const auto& f : ranks) {
    if (f.problem == Problem::kNone) continue;
    if (!worst || static_cast<int>(f.problem) < static_cast<int>(worst->problem)) worst = &f;
  }
  return worst;
}

}  // namespace mddp::labs
