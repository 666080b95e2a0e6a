// write_atomically (core/common/files.h): a reader sees the old content or
// the new, never part of one; a write that fails leaves the old file and no
// temporary; writers at once (the coordinator's job.json is written by the
// attempt that forms and by the ticker) each leave a whole file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/common/files.h"
#include "support/files.h"

namespace fs = std::filesystem;
using mddp::write_atomically;
using mddp::test::read_file;
using mddp::test::TempDir;

namespace {

// The names in `dir`, but for `keep`.
std::vector<std::string> others(const std::string& dir, const std::string& keep) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != keep) out.push_back(e.path().filename().string());
  return out;
}

TEST(WriteAtomically, ReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.path() + "/job.json";
  ASSERT_EQ(write_atomically(path, "first\n"), "");
  ASSERT_EQ(write_atomically(path, "second\n"), "");
  EXPECT_EQ(read_file(path), "second\n");
  EXPECT_EQ(others(dir.path(), "job.json"), std::vector<std::string>{});
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::others_write, fs::perms::none);
}

TEST(WriteAtomically, AFailedWriteSaysWhyAndLeavesNothing) {
  TempDir dir;
  const std::string missing = dir.path() + "/no-such-dir/job.json";
  EXPECT_EQ(write_atomically(missing, "x"), "No such file or directory");
  EXPECT_EQ(others(dir.path(), ""), std::vector<std::string>{});
}

TEST(WriteAtomically, WritersAtOnceEachLeaveAWholeFile) {
  TempDir dir;
  const std::string path = dir.path() + "/job.json";
  constexpr int kWriters = 4, kWrites = 200;
  // Each writer's text is long (a write of several pages) and its own.
  std::vector<std::string> texts;
  for (int w = 0; w < kWriters; ++w)
    texts.push_back(std::string(64 << 10, static_cast<char>('a' + w)));
  std::vector<int> failed(kWriters, 0);
  std::vector<std::string> why(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kWrites; ++i)
        if (std::string e = write_atomically(path, texts[w]); !e.empty()) {
          ++failed[w];
          why[w] = e;
        }
    });
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWriters; ++w)
    EXPECT_EQ(failed[w], 0) << "writer " << w << " of " << kWrites << " writes: " << why[w];
  const std::string last = read_file(path);
  EXPECT_NE(std::find(texts.begin(), texts.end(), last), texts.end())
      << "the file is no writer's whole text (" << last.size() << " bytes)";
  EXPECT_EQ(others(dir.path(), "job.json"), std::vector<std::string>{});
}

}  // namespace
