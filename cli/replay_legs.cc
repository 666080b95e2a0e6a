#include "cli/replay_legs.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::cli {
namespace {

// One line of membership.jsonl: the world size from a step on.
ReplayLeg read_line(const std::string& text, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("from_step") || !j.contains("world_size") ||
      !j["from_step"].is_number_integer() || !j["world_size"].is_number_integer())
    throw InputError(str(where,
                         ": not a membership line (a JSON object with from_step and "
                         "world_size)"));
  ReplayLeg leg{j["from_step"].get<int64_t>(), 0, j["world_size"].get<int>()};
  if (leg.from_step < 0 || leg.world_size < 1)
    throw InputError(str(where, ": from_step ", leg.from_step, ", world_size ", leg.world_size));
  return leg;
}

}  // namespace

std::vector<ReplayLeg> replay_legs(const std::filesystem::path& path) {
  const std::filesystem::path file =
      std::filesystem::is_directory(path) ? path / "membership.jsonl" : path;
  std::ifstream in(file);
  if (!in) throw InputError(str("--replay: cannot read ", file.string()));
  std::vector<ReplayLeg> lines;
  std::string text;
  for (int n = 1; std::getline(in, text); ++n)
    if (!text.empty()) lines.push_back(read_line(text, str(file.string(), " line ", n)));
  if (lines.empty())
    throw InputError(str("--replay: ", file.string(), " has no line: the run took no step"));
  std::vector<ReplayLeg> legs;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    ReplayLeg leg = lines[i];
    if (i + 1 < lines.size()) {
      leg.to_step = lines[i + 1].from_step;
      // An attempt that trained nothing the next one kept (it resumed from
      // as far back): the steps are the next one's.
      if (leg.to_step <= leg.from_step) continue;
    }
    if (!legs.empty() && legs.back().world_size == leg.world_size)
      legs.back().to_step = leg.to_step;  // one stretch on one size: one leg
    else
      legs.push_back(leg);
  }
  return legs;
}

}  // namespace mddp::cli
