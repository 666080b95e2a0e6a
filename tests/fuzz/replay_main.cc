// The driver of the fuzz targets outside the fuzz build: runs
// LLVMFuzzerTestOneInput once on every file named (directories: every file
// in them, recursively), as libFuzzer's `-runs=0 DIR...` does, so the seed
// corpus, with every reproducer saved into it, is a regression test of each build.
// Arguments starting with '-' (libFuzzer's flags) are ignored.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (argv[i][0] == '-') continue;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg))
        if (e.is_regular_file()) inputs += run_file(e.path());
    } else if (std::filesystem::exists(arg)) {
      inputs += run_file(arg);
    } else {
      std::fprintf(stderr, "no such input: %s\n", argv[i]);
      return 1;
    }
  }
  std::printf("%d inputs ran without a finding\n", inputs);
  return inputs > 0 ? 0 : 1;
}
