#include "labs/support/diagnosis.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::labs {
namespace {

constexpr int kRanks = 4;  // every diagnosis job: 4 ranks on this host

// The seal: the fault as JSON, XORed with a fixed keystream and written as
// hex. It hides the answer from a glance, not from a determined reader: the
// Lab is about the signals, and the seal only keeps them the quicker way.
std::string xor_stream(const std::string& bytes) {
  std::mt19937_64 key(0x6d64647020646961ULL);  // "mddp dia"
  std::string out = bytes;
  for (char& c : out) c = static_cast<char>(c ^ static_cast<char>(key() & 0xff));
  return out;
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> from_hex(const std::string& hex) {
  if (hex.size() % 2) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const std::string byte = hex.substr(i, 2);
    if (byte.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
    out += static_cast<char>(std::stoi(byte, nullptr, 16));
  }
  return out;
}

template <typename T>
T pick(std::mt19937_64& rng, const std::vector<T>& from) {
  return from[rng() % from.size()];
}

int64_t between(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

// The answers file's top-level numbers and strings (what the questions take).
nlohmann::json answers_of(const toml::table& t) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    if (const auto i = node.value_exact<int64_t>())
      j[k] = *i;
    else if (const auto d = node.value_exact<double>())
      j[k] = *d;
    else if (const auto s = node.value_exact<std::string>())
      j[k] = *s;
  }
  return j;
}

}  // namespace

std::string PlantedFault::environment() const {
  if (lab == "hang") return str("hang:", rank, ":", step, ":", phase);
  if (lab == "straggler") return str("slow:", rank, ":", phase, ":", ms);
  if (lab == "mismatched_rank") return str("mismatch:", rank, ":", setting);
  if (lab == "uneven_work") return str("short:", rank, ":", step);
  if (lab == "slow_link") return str("link:", rank, ":", peer, ":", mbps);
  return str("nan:", rank, ":", step);
}

const std::vector<std::string>& diagnosis_labs() {
  static const std::vector<std::string> names{
      "hang", "straggler", "poisoned_shard", "mismatched_rank", "uneven_work", "slow_link"};
  return names;
}

bool is_diagnosis_lab(const std::string& name) {
  const auto& names = diagnosis_labs();
  return std::find(names.begin(), names.end(), name) != names.end();
}

PlantedFault plant_fault(const std::string& lab, uint64_t seed) {
  MDDP_CHECK(is_diagnosis_lab(lab), "not a diagnosis Lab: ", lab);
  std::mt19937_64 rng(seed);
  PlantedFault f;
  f.lab = lab;
  f.rank = static_cast<int>(between(rng, 0, kRanks - 1));
  const std::vector<std::string> phases{"data", "forward", "backward"};
  if (lab == "hang") {
    f.step = between(rng, 20, 200);
    f.phase = pick(rng, phases);
  } else if (lab == "uneven_work") {
    // Not a step every rank ends with a loss all-reduce anyway (every 20th
    // prints a line; 128 ends an epoch): there the last step's all-reduce
    // of the loss would still match the others'.
    f.step = 20 * between(rng, 1, 9) + between(rng, 1, 19);
    if (f.step % 128 == 0) ++f.step;
  } else if (lab == "straggler") {
    f.phase = pick(rng, phases);
    f.ms = static_cast<int>(between(rng, 2, 5));
  } else if (lab == "mismatched_rank") {
    f.setting = pick(rng, std::vector<std::string>{"width", "depth"});
  } else if (lab == "slow_link") {
    // Neighbours on the ring the job runs (--algo ring), so the link is used:
    // rank sends to peer on it. Far below loopback's GB/s, which a loaded
    // machine's scheduling can bring down to a few hundred MB/s.
    f.peer = (f.rank + 1) % kRanks;
    f.mbps = static_cast<int>(between(rng, 15, 40));
  } else {
    f.step = between(rng, 10, 50);
  }
  return f;
}

std::vector<std::string> job_arguments(const std::string& lab, const std::string& run_dir,
                                       double linger_s) {
  std::vector<std::string> args{"run",   "--nproc",       std::to_string(kRanks), "--run-dir",
                                run_dir, "--http-linger", str(linger_s),          "--dataset"};
  if (lab == "hang" || lab == "uneven_work")  // waits time out in 15 s, not the default minute
    args.insert(args.end(), {"synthetic", "--width", "64", "--steps", "400", "--log-every", "20",
                             "--comm-timeout-ms", "15000"});
  else if (lab == "straggler")
    args.insert(args.end(), {"synthetic", "--width", "256", "--steps", "200"});
  else if (lab == "slow_link")  // TCP: the kernel paces it; ring: every link carries the same bytes
    args.insert(args.end(), {"synthetic", "--width", "256", "--steps", "150", "--transport", "tcp",
                             "--algo", "ring"});
  else if (lab == "mismatched_rank")
    args.insert(args.end(), {"synthetic", "--width", "256", "--depth", "2", "--steps", "50"});
  else  // a regression: a NaN target reaches the loss (a NaN input would vanish in a ReLU)
    args.insert(args.end(), {"synthetic-regression", "--loss", "mse", "--classes", "0", "--width",
                             "64", "--steps", "60", "--log-every", "1", "--allow-nonfinite-loss"});
  return args;
}

std::filesystem::path sealed_fault_path(const std::filesystem::path& run_dir) {
  return run_dir / "lab-fault.sealed";
}

void seal_fault(const PlantedFault& f, const std::filesystem::path& run_dir) {
  const nlohmann::json j{{"lab", f.lab},     {"rank", f.rank}, {"step", f.step},
                         {"phase", f.phase}, {"ms", f.ms},     {"setting", f.setting},
                         {"peer", f.peer},   {"mbps", f.mbps}};
  std::ofstream out(sealed_fault_path(run_dir));
  out << to_hex(xor_stream(j.dump())) << "\n";
  if (!out.flush()) throw InputError(str("cannot write ", sealed_fault_path(run_dir).string()));
}

std::optional<PlantedFault> unseal_fault(const std::filesystem::path& run_dir) {
  std::ifstream in(sealed_fault_path(run_dir));
  if (!in) return std::nullopt;
  std::string hex;
  in >> hex;
  const auto bytes = from_hex(hex);
  const auto j =
      bytes ? nlohmann::json::parse(xor_stream(*bytes), nullptr, false) : nlohmann::json();
  if (!j.is_object() || !j.contains("lab"))
    throw InputError(str(sealed_fault_path(run_dir).string(),
                         " is damaged: make a new run with `microddp lab run`"));
  return PlantedFault{j.value("lab", ""),   j.value("rank", -1), j.value("step", int64_t{0}),
                      j.value("phase", ""), j.value("ms", 0),    j.value("setting", ""),
                      j.value("peer", -1),  j.value("mbps", 0)};
}

std::optional<int64_t> DiagnosisCase::whole(const char* key) const {
  const auto it = answers.find(key);
  if (it == answers.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    return std::nullopt;
  return it->get<int64_t>();
}
std::optional<double> DiagnosisCase::number(const char* key) const {
  const auto it = answers.find(key);
  if (it == answers.end() || !it->is_number() || it->get<double>() < 0) return std::nullopt;
  return it->get<double>();
}
std::optional<std::string> DiagnosisCase::text(const char* key) const {
  const auto it = answers.find(key);
  if (it == answers.end() || !it->is_string() || it->get<std::string>().empty())
    return std::nullopt;
  return it->get<std::string>();
}

std::optional<DiagnosisCase> open_case(const std::string& lab, const CheckOptions& o,
                                       Report& report) {
  const std::filesystem::path file = std::filesystem::path(o.work_dir) / (lab + ".toml");
  if (!std::filesystem::exists(file)) {
    report.fail(str("no answers at ", file.string(), ": `microddp lab reset ", lab,
                    "` makes the file to fill in"));
    return std::nullopt;
  }
  DiagnosisCase c;
  try {
    c.answers = answers_of(toml::parse_file(file.string()));
  } catch (const toml::parse_error& e) {
    report.fail(str(file.string(), ": ", e.description(), " (line ", e.source().begin.line, ")"));
    return std::nullopt;
  }
  const auto run = c.text("run");
  c.run = run ? std::filesystem::path(*run) : std::filesystem::path("runs") / lab;
  if (c.run.is_relative()) c.run = std::filesystem::path(o.root_dir) / c.run;
  const auto fault = unseal_fault(c.run);
  if (!fault || fault->lab != lab) {
    report.fail(str("no job of this Lab in ", c.run.string(), ": make one first with"),
                {str("build/cli/microddp lab run ", lab)});
    return std::nullopt;
  }
  c.fault = *fault;
  report.passed(str("read the run ", c.run.string()), 1);
  return c;
}

int verdict_rank(const std::filesystem::path& run) {
  std::ifstream in(run / "coordinator.log");
  const std::regex failed(R"(job '.*' failed: rank ([0-9]+) \(host)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, failed)) return std::stoi(m[1]);
  return -1;
}

std::optional<perf::Analysis> analyze_case(const DiagnosisCase& c, Report& report) {
  try {
    return perf::analyze(perf::load_run(c.run), perf::AnalyzeOptions{});
  } catch (const InputError& e) {
    report.fail(str("analyze cannot read ", c.run.string(), ": ", e.what()));
    return std::nullopt;
  }
}

Grading not_answered(const char* key) {
  return {str("'", key, "' is not answered yet"), {}};
}

void report_diagnosis(const Grading& v, const std::vector<std::string>& explanation, int questions,
                      Report& report) {
  if (!v.wrong.empty()) {
    report.fail(v.wrong, v.details);
    return;
  }
  report.passed("every answer names the planted fault", questions);
  report.note("What happened, and what showed it:");
  for (const auto& line : explanation) report.note("  " + line);
}

}  // namespace mddp::labs
