#include "worker/slurm_env.h"

#include <cstdlib>

#include "core/common/check.h"

namespace mddp::worker {
namespace {

[[noreturn]] void bad_nodelist(std::string_view list, const std::string& why) {
  throw InputError(str("SLURM_JOB_NODELIST='", list, "' is not a SLURM node list: ", why));
}

// The names one bracket's body stands for: "01-03,07" -> 01 02 03 07.
std::vector<std::string> expand_bracket(std::string_view list, std::string_view body) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = std::min(body.find(',', start), body.size());
    const std::string_view item = body.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    const auto digits = [](std::string_view s) {
      return !s.empty() && s.size() <= 9 &&
             s.find_first_not_of("0123456789") == std::string_view::npos;
    };
    if (!digits(lo) || !digits(hi))
      bad_nodelist(list, str("'[", body, "]' holds '", item, "', not N or N-M"));
    const long a = std::stol(std::string(lo)), b = std::stol(std::string(hi));
    if (b < a) bad_nodelist(list, str("the range ", item, " runs backwards"));
    if (b - a >= 100'000)
      bad_nodelist(list, str("the range ", item, " has more than 100000 nodes"));
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size())
        s.insert(0, lo.size() - s.size(), '0');  // node[08-11]: keep the padding
      out.push_back(std::move(s));
    }
    start = comma + 1;
  }
  return out;
}

// One name with zero or more brackets: every combination, left to right.
void expand_name(std::string_view list, std::string_view name, std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  std::size_t i = 0;
  while (i < name.size()) {
    const std::size_t open = name.find('[', i);
    const std::string_view text = name.substr(i, open == std::string_view::npos ? open : open - i);
    if (text.find(']') != std::string_view::npos) bad_nodelist(list, "a ']' without its '['");
    for (auto& p : partial) p += text;
    if (open == std::string_view::npos) break;
    const std::size_t close = name.find(']', open);
    if (close == std::string_view::npos) bad_nodelist(list, "a '[' without its ']'");
    std::vector<std::string> next;
    for (const auto& p : partial)
      for (const auto& n : expand_bracket(list, name.substr(open + 1, close - open - 1)))
        next.push_back(p + n);
    partial = std::move(next);
    i = close + 1;
  }
  if (name.empty() || partial.front().empty()) bad_nodelist(list, "an empty node name");
  for (auto& p : partial) out.push_back(std::move(p));
}

// A non-negative integer from the variable `var`, nullopt when unset or empty.
std::optional<int> int_env(const char* var) {
  const char* v = std::getenv(var);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 10'000'000)
    throw InputError(str(var, "='", v, "' is not a number (0, 1, ...)"));
  return static_cast<int>(n);
}

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {  // split on the commas outside brackets
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0 || depth > 1) bad_nodelist(list, "brackets do not pair up");
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      expand_name(list, list.substr(start, i - start), out);
      start = i + 1;
    }
  }
  return out;
}

std::optional<SlurmTask> slurm_task() {
  if (const char* launcher_rank = std::getenv("RANK"); launcher_rank && *launcher_rank)
    return std::nullopt;
  const std::optional<int> rank = int_env("SLURM_PROCID");
  if (!rank) return std::nullopt;
  SlurmTask t;
  t.rank = *rank;
  t.local_rank = int_env("SLURM_LOCALID").value_or(0);
  const std::optional<int> ntasks = int_env("SLURM_NTASKS");
  if (!ntasks || *ntasks < 1)
    throw InputError(
        "SLURM_PROCID is set but SLURM_NTASKS is not (or is 0): start the workers with srun "
        "inside an allocation (sbatch, salloc)");
  t.ntasks = *ntasks;
  if (t.rank >= t.ntasks)
    throw InputError(str("SLURM_PROCID=", t.rank, " is not a task of SLURM_NTASKS=", t.ntasks));
  if (const char* nodes = std::getenv("SLURM_JOB_NODELIST"); nodes && *nodes)
    t.nodes = expand_nodelist(nodes);
  return t;
}

}  // namespace mddp::worker
