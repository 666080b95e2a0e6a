// `microddp lab list|check|reset|solution`: the course's Labs (labs/README.md).
// A student writes the functions in my_work/, rebuilds with cmake, and
// `lab check NAME` runs the checker over what this binary was built with;
// it builds nothing itself.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/split_list.h"
#include "core/common/strings.h"
#include "core/tensor/ops.h"
#include "labs/registry.h"
#include "labs/support/diagnosis.h"
#include "labs/support/values.h"

namespace mddp::cli {
namespace {

struct LabFlags {
  std::string work_dir = labs::built_work_dir();
  std::string name;
  bool all = false;
  std::string world_sizes = "1,2,3,4,7";
  std::string transports = "tcp,shm";
  int64_t timeout_ms = 10'000;
  int speed_ranks = 2;
  std::string run_dir;  // lab run: default runs/NAME in the repository
  int64_t seed = -1;    // lab run: -1 draws one
  double linger_s = 120;
};

labs::CheckOptions check_options(const LabFlags& o) {
  labs::CheckOptions c;
  c.world_sizes.clear();
  for (const auto& w : split_list(o.world_sizes)) {
    int n = 0;
    try {
      n = std::stoi(w);
    } catch (const std::exception&) {
    }
    if (n < 1 || n > labs::kMaxCheckedRanks)
      throw InputError(
          str("--world-sizes: '", w, "' is not a world size from 1 to ", labs::kMaxCheckedRanks));
    c.world_sizes.push_back(n);
  }
  if (c.world_sizes.empty()) throw InputError("--world-sizes needs at least one world size");
  c.transports.clear();
  for (const auto& t : split_list(o.transports)) {
    const auto kind = comm::parse_transport(t);
    if (kind == comm::TransportKind::kAuto)
      throw InputError("--transports takes tcp and shm, not auto");
    c.transports.push_back(kind);
  }
  if (c.transports.empty()) throw InputError("--transports needs tcp, shm or both");
  if (o.timeout_ms < 100) throw InputError("--timeout-ms must be at least 100");
  c.timeout = std::chrono::milliseconds(o.timeout_ms);
  if (o.speed_ranks != 0 && (o.speed_ranks < 2 || o.speed_ranks > labs::kMaxCheckedRanks))
    throw InputError(
        str("--speed-ranks must be 0 (no speed comparison) or 2 to ", labs::kMaxCheckedRanks));
  c.speed_ranks = o.speed_ranks;
  c.work_dir = o.work_dir;
  c.root_dir = labs::source_root();
  return c;
}

// Runs a lab subcommand; a path it cannot use (the work directory, most
// likely) is one clear line, not an internal error.
void guarded(const LabFlags& o, const std::function<void(const LabFlags&)>& body) {
  if (o.work_dir.empty()) throw InputError("--work-dir must name a directory (default: my_work/)");
  try {
    body(o);
  } catch (const std::filesystem::filesystem_error& e) {
    throw InputError(
        str("cannot use '", e.path1().string(), "': ", e.code().message(), " (check --work-dir)"));
  }
}

void list(const LabFlags& o) {
  std::printf("The course's Labs (labs/README.md); your work is in %s\n\n", o.work_dir.c_str());
  std::printf("%3s  %-16s %-24s %s\n", "#", "lab", "status", "what");
  for (const auto& lab : labs::all_labs())
    std::printf("%3d  %-16s %-24s %s  (%s)\n", lab.number, lab.name.c_str(),
                labs::lab_status(lab, labs::source_root(), o.work_dir).c_str(), lab.title.c_str(),
                lab.chapter.c_str());
  std::printf(
      "\nStart with Lab 1: read labs/01_manual/README.md, edit my_work/manual.cc, then\n"
      "  cmake --build build && build/cli/microddp lab check manual\n");
}

// Checks one Lab; true when it passed.
bool check(const labs::Lab& lab, const labs::CheckOptions& c) {
  std::printf("Lab %d %s: %s (my_work/%s)\n", lab.number, lab.name.c_str(), lab.title.c_str(),
              lab.work_file.c_str());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  labs::Report report(stdout);
  lab.check(labs::linked_implementations(), c, report);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s in %.1f s\n\n", report.ok() ? "PASSED" : "FAILED", s);
  labs::record_check(lab, c.work_dir, report.ok());
  return report.ok();
}

void check_command(const LabFlags& o) {
  if (o.all == !o.name.empty())
    throw InputError("lab check takes a Lab's name or --all (`microddp lab list`)");
  const labs::CheckOptions c = check_options(o);
  tensor::set_num_threads(1);  // each rank one core, as `microddp run` gives them
  if (!o.all) {
    const labs::Lab& lab = labs::find_lab(o.name);
    if (!check(lab, c))
      throw Error(str("Lab ", lab.number, " ", lab.name, " is not passed yet: see FAIL above"));
    return;
  }
  int failed = 0;
  for (const auto& lab : labs::all_labs()) failed += !check(lab, c);
  if (failed) throw Error(str(failed, " of ", labs::all_labs().size(), " Labs not passed yet"));
  std::printf("every Lab passed\n");
}

// `lab run NAME`: a diagnosis Lab's job with its fault planted and sealed in
// the run directory; this process becomes `microddp run` (exec), so the
// job's output, Ctrl-C and exit status are the run's own.
void run_diagnosis(const LabFlags& o) {
  const labs::Lab& lab = labs::find_lab(o.name);
  if (!labs::is_diagnosis_lab(lab.name))
    throw InputError(str("lab run starts the diagnosis Labs' jobs (",
                         join(labs::diagnosis_labs(), ", "), "), not Lab ", lab.number, " ",
                         lab.name));
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(
      o.run_dir.empty() ? fs::path(labs::source_root()) / "runs" / lab.name : fs::path(o.run_dir));
  if (fs::exists(dir) && !fs::is_empty(dir)) {
    if (!fs::exists(labs::sealed_fault_path(dir)))
      throw InputError(str("--run-dir ", dir.string(),
                           " holds files of something else: give an empty or new directory"));
    fs::remove_all(dir);  // an earlier try of a Lab: a new fault, a new run
  }
  fs::create_directories(dir);
  const uint64_t seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}();
  const labs::PlantedFault fault = labs::plant_fault(lab.name, seed);
  labs::seal_fault(fault, dir);
  std::printf(
      "Lab %d %s: a job of 4 ranks with a fault planted at random, hidden from you.\n"
      "Watch it (the dashboard's address follows), read %s/README.md, answer in\n"
      "%s/%s, then: build/cli/microddp lab check %s\n\n",
      lab.number, lab.name.c_str(), lab.folder.c_str(), o.work_dir.c_str(), lab.work_file.c_str(),
      lab.name.c_str());
  std::fflush(stdout);
  std::vector<std::string> args = labs::job_arguments(lab.name, dir.string(), o.linger_s);
  args.insert(args.begin(), "microddp");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv("MDDP_LAB_FAULT", fault.environment().c_str(), 1);
  ::execv("/proc/self/exe", argv.data());
  throw Error(str("cannot start microddp run: ", std::strerror(errno)));
}

void reset(const LabFlags& o) {
  const labs::Lab& lab = labs::find_lab(o.name);
  namespace fs = std::filesystem;
  const fs::path from = fs::path(labs::source_root()) / lab.folder / lab.template_file;
  const fs::path to = fs::path(o.work_dir) / lab.work_file;
  fs::create_directories(to.parent_path());
  if (fs::exists(to)) {
    fs::copy_file(to, fs::path(to.string() + ".bak"), fs::copy_options::overwrite_existing);
    std::printf("your previous version is in %s.bak\n", to.string().c_str());
  }
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  std::printf(
      "%s is the exercise again (from %s)%s\n", to.string().c_str(), from.string().c_str(),
      lab.work_file.ends_with(".cc") ? "; rebuild before checking: cmake --build build" : "");
}

void solution(const LabFlags& o) {
  const labs::Lab& lab = labs::find_lab(o.name);
  std::printf("Lab %d %s: %s\n\nThe reference lives in\n", lab.number, lab.name.c_str(),
              lab.title.c_str());
  for (const auto& where : lab.reference) std::printf("  %s\n", where.c_str());
  if (lab.work_file.ends_with(".cc"))
    std::printf("%s/solution.cc, the Lab's reference solution, calls it.\n", lab.folder.c_str());
  std::printf("Explained in %s.\n\nHow it works:\n", lab.chapter.c_str());
  // Wrapped at 78 columns.
  std::string line;
  std::stringstream words(lab.explanation);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > 76) {
      std::printf("  %s\n", line.c_str());
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  if (!line.empty()) std::printf("  %s\n", line.c_str());
}

}  // namespace

void register_lab(CLI::App& app) {
  auto o = std::make_shared<LabFlags>();
  auto* lab = app.add_subcommand(
      "lab", "The course's Labs: write the functions in my_work/, check them here");
  lab->require_subcommand(1);
  const auto work_dir = [o](CLI::App* sub) {
    sub->add_option("--work-dir", o->work_dir,
                    "where your work is (this binary was built with the default's .cc files)")
        ->capture_default_str();
    return sub;
  };

  work_dir(lab->add_subcommand("list", "The Labs in syllabus order and where you stand"))
      ->callback([o] { guarded(*o, list); });

  auto* chk = work_dir(
      lab->add_subcommand("check", "Check a Lab (what this binary was built with: rebuild first)"));
  chk->add_option("name", o->name, "the Lab (`microddp lab list`)");
  chk->add_flag("--all", o->all, "check every Lab");
  chk->add_option("--world-sizes", o->world_sizes, "world sizes, comma-separated (1 to 7)")
      ->capture_default_str();
  chk->add_option("--transports", o->transports, "tcp, shm or both")->capture_default_str();
  chk->add_option("--timeout-ms", o->timeout_ms,
                  "bound on each collective (a deadlock fails after it)")
      ->capture_default_str();
  chk->add_option("--speed-ranks", o->speed_ranks, "ranks of the speed comparison (0: skip it)")
      ->capture_default_str();
  chk->callback([o] { guarded(*o, check_command); });

  auto* rst = work_dir(lab->add_subcommand(
      "reset", "Restore a Lab's exercise in my_work/ (your version is kept as .bak)"));
  rst->add_option("name", o->name, "the Lab")->required();
  rst->callback([o] { guarded(*o, reset); });

  auto* run = work_dir(lab->add_subcommand(
      "run", "Start a diagnosis Lab's job (labs/README.md) with a hidden fault"));
  run->add_option("name", o->name, "the Lab")->required();
  run->add_option("--run-dir", o->run_dir,
                  "where the job writes (default: runs/NAME in the repository; a new try "
                  "replaces an earlier one there)");
  run->add_option("--seed", o->seed, "draw the fault from this seed (default: a random one)")
      ->transform(whole_number_in(0));
  run->add_option("--linger", o->linger_s,
                  "keep the dashboard up this many seconds after the job ends (Ctrl-C ends it)")
      ->check(finite_in(0, 86400))
      ->capture_default_str();
  run->callback([o] { guarded(*o, run_diagnosis); });

  auto* sol = lab->add_subcommand("solution", "Where a Lab's reference lives, and how it works");
  sol->add_option("name", o->name, "the Lab")->required();
  sol->callback([o] { solution(*o); });
}

}  // namespace mddp::cli
