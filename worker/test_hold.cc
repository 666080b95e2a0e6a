#include "worker/test_hold.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace mddp::worker {

TestHold::TestHold() {
  const char* steps = std::getenv("MDDP_TEST_HOLD_AT_STEPS");
  const char* dir = std::getenv("MDDP_TEST_HOLD_DIR");
  if (!steps || !dir || !*dir) return;
  dir_ = dir;
  std::istringstream in(steps);
  for (std::string s; std::getline(in, s, ',');)
    if (!s.empty()) steps_.insert(std::atoll(s.c_str()));
}

void TestHold::after_step(int64_t step, int rank) const {
  if (!steps_.count(step)) return;
  const std::filesystem::path dir(dir_);
  std::ofstream(dir / (std::to_string(step) + ".held." + std::to_string(rank))).flush();
  const std::filesystem::path go = dir / (std::to_string(step) + ".go");
  while (!std::filesystem::exists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

}  // namespace mddp::worker
