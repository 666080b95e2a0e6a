// The checkpoint pair (core/train/checkpoint.h): written and read back,
// bound by its id, a torn or partial pair refused and passed over, pruning,
// a failed write that leaves the previous pair and no temporary file, and
// the stale temporary files of dead processes removed.
#include "core/train/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/common/check.h"

namespace mddp::train {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ckpt-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A pair at `step` whose tensors hold `value` (and -value in the state file).
  static CheckpointContents contents(int64_t step, float value, int64_t weights = 4,
                                     int64_t state = 4) {
    CheckpointContents c;
    c.step = step;
    c.weights = {
        {"1.weight", tensor::Tensor::from_vector({weights}, std::vector<float>(weights, value))}};
    c.state = {{"1.weight.exp_avg",
                tensor::Tensor::from_vector({state}, std::vector<float>(state, -value))}};
    c.model_metadata = {{"model", "{}"}};
    c.state_metadata = {{"config", "{}"}};
    return c;
  }
  void expect_refused(const std::string& file, const std::string& why) {
    try {
      read_checkpoint(file);
      ADD_FAILURE() << "accepted " << file;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  int temp_files() const {
    int n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_))
      n += e.path().string().find(".tmp.") != std::string::npos;
    return n;
  }

  fs::path dir_;
};

TEST_F(CheckpointTest, APairReadsBackWithOneIdAndTheStep) {
  write_checkpoint(path("a.safetensors"), contents(7, 1.5f));
  EXPECT_TRUE(fs::exists(path("a.state.safetensors")));
  const Checkpoint c = read_checkpoint(path("a.safetensors"));
  EXPECT_EQ(c.step, 7);
  EXPECT_EQ(c.model.metadata.at("format"), kCheckpointFormat);
  EXPECT_EQ(c.model.metadata.at("checkpoint_id"), c.state.metadata.at("checkpoint_id"));
  EXPECT_EQ(c.model.tensors.at(0).value.to_vector(), std::vector<float>(4, 1.5f));
  EXPECT_EQ(c.state.tensors.at(0).value.to_vector(), std::vector<float>(4, -1.5f));
  EXPECT_EQ(temp_files(), 0);
}

// The id is a function of the contents: the same state gives the same bytes, another state another
// id.
TEST_F(CheckpointTest, TheIdFollowsTheContents) {
  write_checkpoint(path("a.safetensors"), contents(7, 1.5f));
  write_checkpoint(path("b.safetensors"), contents(7, 1.5f));
  write_checkpoint(path("c.safetensors"), contents(7, 2.5f));
  const auto id = [&](const char* f) { return read_checkpoint(path(f)).id; };
  EXPECT_EQ(id("a.safetensors"), id("b.safetensors"));
  EXPECT_NE(id("a.safetensors"), id("c.safetensors"));
}

// A crash between the two renames: the state file is new, the model file old.
// Such a pair is refused by name and passed over when resuming from the directory.
TEST_F(CheckpointTest, ATornPairIsRefusedAndPassedOver) {
  write_checkpoint(path("checkpoints/step-00000002.safetensors"), contents(2, 1.0f));
  write_checkpoint(path("checkpoint.safetensors"), contents(2, 1.0f));
  write_checkpoint(path("next.safetensors"), contents(4, 2.0f));
  fs::copy_file(path("next.state.safetensors"), path("checkpoint.state.safetensors"),
                fs::copy_options::overwrite_existing);
  fs::remove(path("next.safetensors"));
  fs::remove(path("next.state.safetensors"));
  expect_refused(path("checkpoint.safetensors"), "are of different checkpoints");
  EXPECT_EQ(find_checkpoint(dir_.string()), path("checkpoints/step-00000002.safetensors"));
}

TEST_F(CheckpointTest, TheNewestCompletePairOfADirectoryIsFound) {
  for (int64_t step : {2, 4, 6})
    write_checkpoint(periodic_checkpoint_path(dir_.string(), step), contents(step, 1.0f));
  write_checkpoint(final_checkpoint_path(dir_.string()), contents(5, 1.0f));
  EXPECT_EQ(find_checkpoint(dir_.string()), periodic_checkpoint_path(dir_.string(), 6));
  fs::remove(
      state_path_of(periodic_checkpoint_path(dir_.string(), 6)));  // a model file alone: incomplete
  EXPECT_EQ(find_checkpoint(dir_.string()), final_checkpoint_path(dir_.string()));
  // Either file of a pair names it.
  EXPECT_EQ(find_checkpoint(path("checkpoint.state.safetensors")), path("checkpoint.safetensors"));
  fs::create_directories(path("empty"));
  EXPECT_THROW(find_checkpoint(path("empty")), InputError);
  EXPECT_THROW(find_checkpoint(path("missing")), InputError);
}

TEST_F(CheckpointTest, MissingTruncatedAndForeignFilesAreRefusedByName) {
  write_checkpoint(path("a.safetensors"), contents(3, 1.0f));
  fs::remove(path("a.state.safetensors"));
  expect_refused(path("a.safetensors"), "a.state.safetensors' is missing");

  write_checkpoint(path("b.safetensors"), contents(3, 1.0f));
  fs::resize_file(path("b.safetensors"), fs::file_size(path("b.safetensors")) - 4);
  expect_refused(path("b.safetensors"), "truncated");

  save_safetensors(path("plain.safetensors"),
                   {{"1.weight", tensor::Tensor::from_vector({1}, {1.0f})}}, {});
  expect_refused(path("plain.safetensors"), "not a microddp checkpoint");

  std::ofstream(path("garbage.safetensors"))
      << "not a checkpoint at all, but long enough to have a header";
  expect_refused(path("garbage.safetensors"), "garbage.safetensors");
}

TEST_F(CheckpointTest, PruningKeepsTheNewestPairs) {
  for (int64_t step = 1; step <= 5; ++step)
    write_checkpoint(periodic_checkpoint_path(dir_.string(), step), contents(step, 1.0f));
  prune_checkpoints(dir_.string(), 2);
  for (int64_t step = 1; step <= 5; ++step) {
    const std::string p = periodic_checkpoint_path(dir_.string(), step);
    EXPECT_EQ(fs::exists(p), step >= 4) << p;
    EXPECT_EQ(fs::exists(state_path_of(p)), step >= 4) << p;
  }
  prune_checkpoints(dir_.string(), 0);  // 0: keep all
  EXPECT_TRUE(fs::exists(periodic_checkpoint_path(dir_.string(), 4)));
}

// A write that fails part-way (here: at the file size limit, as on a full
// disk), in either file of the pair, throws naming the file, removes the
// temporary files and leaves the previous pair under the same name readable
// and unchanged.
TEST_F(CheckpointTest, AFailedWriteKeepsThePreviousPairAndLeavesNoTemporaryFile) {
  const std::string file = path("checkpoint.safetensors");
  write_checkpoint(file, contents(1, 1.0f));
  const auto old_model = read_checkpoint(file).model.tensors.at(0).value.to_vector();
  struct Case {
    int64_t weights, state;
    const char* failing;  // the temporary file the error names
  };
  for (const Case k : {Case{4, 4096, "checkpoint.state.safetensors.tmp."},
                       Case{4096, 4, "checkpoint.safetensors.tmp."}}) {
    SCOPED_TRACE(k.failing);
    const pid_t child = ::fork();
    if (child == 0) {
      ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
      const rlimit limit{4096, 4096};
      ::setrlimit(RLIMIT_FSIZE, &limit);
      try {
        write_checkpoint(file, contents(2, 2.0f, k.weights, k.state));
      } catch (const Error& e) {
        ::_exit(std::string(e.what()).find(k.failing) != std::string::npos ? 3 : 4);
      }
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 3) << "the write should fail with an error naming " << k.failing;
    const Checkpoint c = read_checkpoint(file);
    EXPECT_EQ(c.step, 1);
    EXPECT_EQ(c.model.tensors.at(0).value.to_vector(), old_model);
    EXPECT_EQ(temp_files(), 0);
  }
}

// What a process killed mid-write leaves is removed at the next start; a
// live process's file and another host's are not.
TEST_F(CheckpointTest, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string mine = temp_path_for(path("checkpoint.safetensors"));
  const std::string host_part = mine.substr(0, mine.rfind('.') + 1);  // PATH.tmp.HOST.
  const std::string stale = host_part + std::to_string(dead);
  const std::string other_host =
      path("checkpoint.safetensors.tmp.elsewhere.") + std::to_string(dead);
  for (const auto& f : {mine, stale, other_host}) std::ofstream(f) << "partial";
  EXPECT_EQ(remove_stale_temps(dir_.string()), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(other_host));
}

}  // namespace
}  // namespace mddp::train
