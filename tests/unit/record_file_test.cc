// RecordFile and LostRecords (core/common/record_file.h): whole records only,
// a failed write cut back to the last whole record, writing resumed when
// space comes back. The failed writes are real ones: RLIMIT_FSIZE makes the
// kernel refuse bytes past a size (EFBIG), as a full disk refuses them.
#include "core/common/record_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/common/check.h"
#include "support/files.h"

namespace fs = std::filesystem;
using mddp::LostRecords;
using mddp::RecordFile;

namespace {

class RecordFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mddp_record_file_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// While alive, writes past `bytes` of any file fail with EFBIG.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);  // the write fails instead of killing the process
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  sighandler_t old_handler_;
};

}  // namespace

TEST_F(RecordFileTest, AppendsAndContinuesAnExistingFile) {
  {
    RecordFile f(dir_ / "r.jsonl");
    EXPECT_EQ(f.append("{\"a\":1}\n{\"a\":2}\n"), 2u);
  }
  RecordFile f(dir_ / "r.jsonl");
  EXPECT_EQ(f.append("{\"a\":3}\n"), 1u);
  EXPECT_EQ(mddp::test::read_file(dir_ / "r.jsonl"), "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
  EXPECT_EQ(f.error(), "");
}

TEST_F(RecordFileTest, CutsATornTailLeftByAnEarlierWriter) {
  std::ofstream(dir_ / "r.jsonl") << "{\"a\":1}\n{\"a\":";
  RecordFile f(dir_ / "r.jsonl");
  EXPECT_EQ(f.append("{\"a\":2}\n"), 1u);
  EXPECT_EQ(mddp::test::read_file(dir_ / "r.jsonl"), "{\"a\":1}\n{\"a\":2}\n");
}

TEST_F(RecordFileTest, AFailedWriteKeepsWholeRecordsAndResumesWhenSpaceReturns) {
  RecordFile f(dir_ / "r.jsonl");
  ASSERT_EQ(f.append("0123456789\n"), 1u);  // 11 bytes
  {
    FileSizeLimit limit(30);  // room for 19 more bytes: one record of 11, then 8 of the next
    EXPECT_EQ(f.append("aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n"), 1u);
    EXPECT_NE(f.error(), "");
    EXPECT_EQ(mddp::test::read_file(dir_ / "r.jsonl"), "0123456789\naaaaaaaaaa\n")
        << "the torn 'bbbbbbbb' must be cut";
    EXPECT_EQ(f.append("dddddddddd\n"), 0u);  // still no room: nothing, not half
    EXPECT_EQ(mddp::test::read_file(dir_ / "r.jsonl"), "0123456789\naaaaaaaaaa\n");
  }
  EXPECT_EQ(f.append("eeeeeeeeee\n"), 1u);  // space came back
  EXPECT_EQ(mddp::test::read_file(dir_ / "r.jsonl"), "0123456789\naaaaaaaaaa\neeeeeeeeee\n");
}

TEST_F(RecordFileTest, AnUnwritableDirectoryIsAnErrorNamingThePath) {
  try {
    RecordFile f(dir_ / "no" / "such" / "r.jsonl");
    FAIL() << "no error";
  } catch (const mddp::Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.jsonl"), std::string::npos) << e.what();
  }
}

TEST(LostRecords, NamesStepRangesPerRank) {
  LostRecords lost;
  EXPECT_EQ(lost.describe(), "");
  for (int64_t s : {5, 3, 4, 9, 7, 8, 12}) lost.add(1, s);  // out of order; 3-5 and 7-9 merge
  lost.add(0, 2);
  lost.add(1, 4);  // a duplicate: counted once
  lost.add(0, 0, /*eval=*/true);
  EXPECT_EQ(lost.count(), 9);
  EXPECT_EQ(lost.describe(), "rank 0 step 2; rank 1 steps 3-5, 7-9, 12 and 1 evaluation");
  LostRecords single;
  for (int64_t s = 40; s <= 60; ++s) single.add(-1, s);
  EXPECT_EQ(single.describe(), "steps 40-60");
}
