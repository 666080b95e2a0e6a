#include "core/comm/types.h"

#include <array>
#include <string_view>
#include <utility>

#include "core/comm/algo_step.h"
#include "core/common/strings.h"

namespace mddp::comm {
namespace {

// One table per enum: the command-line spelling of each value, in enum order.
constexpr std::array<std::pair<DataType, const char*>, 3> kDtypes{
    {{DataType::kFloat32, "fp32"}, {DataType::kFloat16, "fp16"}, {DataType::kBFloat16, "bf16"}}};
constexpr std::array<std::pair<ReduceOp, const char*>, 4> kOps{{{ReduceOp::kSum, "sum"},
                                                                {ReduceOp::kAvg, "avg"},
                                                                {ReduceOp::kMax, "max"},
                                                                {ReduceOp::kMin, "min"}}};
constexpr std::array<std::pair<Algorithm, const char*>, 6> kAlgorithms{
    {{Algorithm::kAuto, "auto"},
     {Algorithm::kRing, "ring"},
     {Algorithm::kNaive, "naive"},
     {Algorithm::kTree, "tree"},
     {Algorithm::kDoubling, "doubling"},
     {Algorithm::kHierarchical, "hierarchical"}}};
constexpr std::array<std::pair<TransportKind, const char*>, 3> kTransports{
    {{TransportKind::kAuto, "auto"}, {TransportKind::kTcp, "tcp"}, {TransportKind::kShm, "shm"}}};
constexpr std::array<std::pair<StepPhase, const char*>, 4> kPhases{
    {{StepPhase::kReduceScatter, "reduce-scatter"},
     {StepPhase::kAllGather, "all-gather"},
     {StepPhase::kReduce, "reduce"},
     {StepPhase::kBroadcast, "broadcast"}}};

template <typename E, std::size_t N>
const char* name_of(const std::array<std::pair<E, const char*>, N>& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

template <typename E, std::size_t N>
E parse(const std::array<std::pair<E, const char*>, N>& table, const std::string& s,
        const char* what) {
  for (const auto& [v, name] : table)
    if (s == name) return v;
  const std::string choices = join(table, ", ", [](const auto& entry) { return entry.second; });
  throw InputError(str("unknown ", what, " '", s, "' (valid choices: ", choices, ")"));
}

}  // namespace

std::size_t element_size(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
  }
  MDDP_CHECK(false, "unknown DataType ", static_cast<int>(t));
  return 0;
}

const char* to_string(DataType t) {
  return name_of(kDtypes, t);
}
const char* to_string(ReduceOp op) {
  return name_of(kOps, op);
}
const char* to_string(Algorithm a) {
  return name_of(kAlgorithms, a);
}
const char* to_string(TransportKind k) {
  return name_of(kTransports, k);
}
const char* to_string(StepPhase p) {
  return name_of(kPhases, p);
}

const char* to_string(PeerFault f) {
  switch (f) {
    case PeerFault::kClosed:
      return "closed";
    case PeerFault::kReset:
      return "reset";
    case PeerFault::kDied:
      return "died";
    case PeerFault::kUnknown:
      break;
  }
  return "unknown";
}

DataType parse_dtype(const std::string& s) {
  return parse(kDtypes, s, "data type");
}
ReduceOp parse_reduce_op(const std::string& s) {
  return parse(kOps, s, "reduce op");
}
Algorithm parse_algorithm(const std::string& s) {
  return parse(kAlgorithms, s, "algorithm");
}
TransportKind parse_transport(const std::string& s) {
  return parse(kTransports, s, "transport");
}
StepPhase parse_step_phase(const std::string& s) {
  return parse(kPhases, s, "step phase");
}

namespace {
// The level's prefix in a phase name ("" for the world).
constexpr std::array<std::pair<StepLevel, std::string_view>, 2> kLevelPrefixes{
    {{StepLevel::kHost, "host "}, {StepLevel::kCrossHost, "cross-host "}}};
}  // namespace

std::string phase_name(const AlgoStep& step) {
  for (const auto& [level, prefix] : kLevelPrefixes)
    if (level == step.level) return std::string(prefix) + to_string(step.phase);
  return to_string(step.phase);
}

void parse_phase_name(const std::string& s, AlgoStep& step) {
  step.level = StepLevel::kWorld;
  std::string_view rest = s;
  for (const auto& [level, prefix] : kLevelPrefixes)
    if (rest.starts_with(prefix)) {
      step.level = level;
      rest.remove_prefix(prefix.size());
      break;
    }
  step.phase = parse_step_phase(std::string(rest));
}

std::string algorithm_of(const std::vector<AlgoStep>& steps) {
  for (const AlgoStep& s : steps) {
    if (s.level != StepLevel::kWorld) return "hierarchical";
    if (s.phase == StepPhase::kReduceScatter && s.send_peer < 0 && s.recv_peer >= 0)
      return "direct";
  }
  return "";
}

}  // namespace mddp::comm
