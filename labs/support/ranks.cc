#include "labs/support/ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/comm/file_store.h"
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

std::vector<RankFinding> run_group(
    int n, const std::function<RankFinding(int rank, comm::Store& store)>& fn,
    std::chrono::milliseconds limit) {
  const std::string dir = make_temp_dir("microddp-lab");
  std::filesystem::create_directories(dir + "/store");
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
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
      std::fflush(stdout);
      _exit(0);
    }
    pids.push_back(pid);
  }
  // Reap; past `limit`, kill what is left (every wait inside has its own,
  // shorter deadline, so this only catches a rank stuck in a student's loop).
  std::vector<int> status(static_cast<std::size_t>(n), -1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int left = n; left > 0;) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r)
        if (pids[static_cast<std::size_t>(r)] == pid) status[static_cast<std::size_t>(r)] = st;
      --left;
      continue;
    }
    if (pid < 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r)
        if (status[static_cast<std::size_t>(r)] == -1)
          kill(pids[static_cast<std::size_t>(r)], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  std::vector<RankFinding> out;
  for (int r = 0; r < n; ++r) {
    std::ifstream in(finding_path(dir, r));
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_object()) {
      out.push_back(from_json(j));
      continue;
    }
    RankFinding f;
    f.rank = r;
    f.problem = Problem::kCrash;
    const int st = status[static_cast<std::size_t>(r)];
    if (st != -1 && WIFEXITED(st)) {
      f.message =
          str("rank ", r, " exited (code ", WEXITSTATUS(st), ") in the middle of the check");
    } else if (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL) {
      f.message = str("rank ", r, " crashed: ", strsignal(WTERMSIG(st)),
                      WTERMSIG(st) == SIGSEGV ? " (a read or write outside a buffer?)" : "");
    } else {
      f.message = str("rank ", r, " was still running after ", limit.count() / 1000,
                      " s and was killed (an endless loop?)");
    }
    out.push_back(f);
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
