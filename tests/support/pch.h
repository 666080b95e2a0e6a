// What nearly every test's translation unit includes, parsed once for all of
// them (tests/CMakeLists.txt: a precompiled header). GoogleTest, spdlog
// (through core/common/log.h) and these standard headers were 4 of a typical
// test file's 11 s of compiling.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
