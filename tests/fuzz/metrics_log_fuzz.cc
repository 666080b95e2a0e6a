// What `microddp analyze` reads (core/perf/analysis.h): a run directory's
// metrics.jsonl and job.json, both possibly hostile (written by whoever
// controls the run directory, or torn by a crash), then the whole analysis
// and its JSON. The first input byte picks which file the rest becomes (the
// other is a small valid one); a refusal is an InputError naming the file.
#include <filesystem>
#include <fstream>

#include "core/perf/analysis.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

namespace {

const std::filesystem::path& run_dir() {
  static const std::filesystem::path dir = [] {
    char tmpl[] = "/tmp/mddp-fuzz-run-XXXXXX";
    MDDP_CHECK(::mkdtemp(tmpl) != nullptr);
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

void write(const std::filesystem::path& p, const char* data, std::size_t size) {
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(data, static_cast<std::streamsize>(size));
}

constexpr const char kMetrics[] =
    "{\"kind\":\"step\",\"rank\":0,\"step\":1,\"step_ms\":2.0,\"forward_ms\":1.0}\n"
    "{\"kind\":\"step\",\"rank\":1,\"step\":1,\"step_ms\":2.5,\"forward_ms\":1.5}\n";
constexpr const char kJob[] =
    "{\"job_id\":\"local\",\"world_size\":2,\"config\":{},\"members\":[]}";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& dir = run_dir();
  const char* rest = reinterpret_cast<const char*>(data) + 1;
  if (data[0] & 1) {
    write(dir / "metrics.jsonl", kMetrics, sizeof kMetrics - 1);
    write(dir / "job.json", rest, size - 1);
  } else {
    write(dir / "metrics.jsonl", rest, size - 1);
    write(dir / "job.json", kJob, sizeof kJob - 1);
  }
  fuzz::refusals_allowed([&] {
    const perf::RunLog run = perf::load_run(dir);
    const perf::Analysis a = perf::analyze(run, {});
    (void)perf::to_json(a).dump();
  });
  return 0;
}
