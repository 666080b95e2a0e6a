// `microddp coordinator` as a process: flags, --config, exit status and the
// one-line failure, SIGTERM. Workers are in-process gRPC clients.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "client.h"
#include "control/job_config_json.h"
#include "coordinator/coordinator.h"
#include "coordinator/flag_config.h"
#include "core/common/check.h"
#include "support/files.h"
#include "support/microddp.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;
using test::TestClient;
namespace fs = std::filesystem;

// One coordinator process; killed (SIGKILL) if still running at destruction.
class Process {
 public:
  Process(const fs::path& dir, std::vector<std::string> args) : dir_(dir) {
    fs::create_directories(dir);
    args.insert(args.begin(), {mddp::test::microddp_binary(), "coordinator"});
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen((dir / "stdout").c_str(), "w", stdout);
      std::freopen((dir / "stderr").c_str(), "w", stderr);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The address the coordinator wrote to --address-file (waits for it).
  std::string address(const fs::path& file) {
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      if (fs::exists(file)) {
        std::string a = mddp::test::read_file(file);
        while (!a.empty() && a.back() == '\n') a.pop_back();
        return a;
      }
      if (exited(0ms)) return "";
      std::this_thread::sleep_for(10ms);
    }
    return "";
  }
  // Waits for the exit; the exit code, or -1 when still running after `timeout`.
  int wait(std::chrono::milliseconds timeout = 20s) {
    if (!exited(timeout)) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  void signal(int sig) { ::kill(pid_, sig); }
  std::string out() const { return mddp::test::read_file(dir_ / "stdout"); }
  std::string err() const { return mddp::test::read_file(dir_ / "stderr"); }

 private:
  bool exited(std::chrono::milliseconds timeout) {
    if (status_ >= 0) return true;
    const auto until = std::chrono::steady_clock::now() + timeout;
    do {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = st;
        return true;
      }
      std::this_thread::sleep_for(5ms);
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }

  fs::path dir_;
  pid_t pid_ = -1;
  int status_ = -1;
};

class CoordinatorCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mddp_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> base(int n) {
    return {"--world-size",
            std::to_string(n),
            "--port",
            "0",
            "--job-id",
            "job",
            "--address-file",
            (dir_ / "addr").string(),
            "--heartbeat-ms",
            "100",
            "--heartbeat-timeout-ms",
            "5000"};
  }
  fs::path dir_;
};

// A relocated release's tests run its binary: $MDDP_MICRODDP, when set and
// not empty, replaces the path this build compiled in.
TEST(MicroddpBinary, TheEnvironmentOverridesTheBuiltPath) {
  const char* outer = std::getenv("MDDP_MICRODDP");
  const std::string saved = outer != nullptr ? outer : "";
  ::unsetenv("MDDP_MICRODDP");
  EXPECT_EQ(mddp::test::microddp_binary(), MDDP_MICRODDP_BUILT);
  ::setenv("MDDP_MICRODDP", "/opt/release/bin/microddp", 1);
  EXPECT_EQ(mddp::test::microddp_binary(), "/opt/release/bin/microddp");
  ::setenv("MDDP_MICRODDP", "", 1);
  EXPECT_EQ(mddp::test::microddp_binary(), MDDP_MICRODDP_BUILT);
  if (outer != nullptr)
    ::setenv("MDDP_MICRODDP", saved.c_str(), 1);
  else
    ::unsetenv("MDDP_MICRODDP");
}

TEST_F(CoordinatorCli, ExitsZeroWhenAllRanksFinish) {
  std::ofstream(dir_ / "token") << "tok\n";
  auto args = base(2);
  const std::vector<std::string> more = {"--token-file", (dir_ / "token").string(),
                                         "--run-dir",    (dir_ / "run").string(),
                                         "--steps",      "5",
                                         "--batch",      "16",
                                         "--dataset",    "synthetic"};
  args.insert(args.end(), more.begin(), more.end());
  Process p(dir_ / "proc", args);
  const std::string addr = p.address(dir_ / "addr");
  ASSERT_NE(addr, "") << p.err();
  TestClient a(addr), b(addr);
  auto ja = std::async(std::launch::async, [&] { return a.join("h0"); });
  ASSERT_TRUE(b.join("h1").ok());
  ASSERT_TRUE(ja.get().ok());
  const train::TrainConfig cfg = parse_job_config(a.joined().job_config_json());
  EXPECT_EQ(cfg.steps, 5);
  EXPECT_EQ(cfg.batch, 16);
  EXPECT_EQ(cfg.data.spec, "synthetic");
  EXPECT_EQ(a.stream_metrics(3, 2), 3);
  EXPECT_EQ(b.stream_metrics(3, 3), 3);
  ASSERT_TRUE(a.leave(true, "").ok());
  ASSERT_TRUE(b.leave(true, "").ok());
  EXPECT_EQ(p.wait(), 0) << p.err();
  EXPECT_NE(p.out().find("listening on 127.0.0.1:"), std::string::npos) << p.out();
  EXPECT_NE(p.out().find("microddp worker --coordinator " + addr + " --token-file"),
            std::string::npos)
      << p.out();
  EXPECT_NE(p.out().find("job 'job' succeeded: 2 ranks finished, 6 metrics records in"),
            std::string::npos)
      << p.out();
  std::ifstream log(dir_ / "run" / "metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(log, l);) ++lines;
  EXPECT_EQ(lines, 6 + 2);  // the records, the line of attempt 0 forming, and its membership line
}

TEST_F(CoordinatorCli, ExitsOneWithOneLineNamingTheFailedRank) {
  auto args = base(2);
  args.push_back("--token");
  args.push_back("tok");
  Process p(dir_ / "proc", args);
  const std::string addr = p.address(dir_ / "addr");
  ASSERT_NE(addr, "") << p.err();
  TestClient a(addr), b(addr);
  auto ja = std::async(std::launch::async, [&] { return a.join("h0", "tok", 0); });
  ASSERT_TRUE(b.join("h1", "tok", 1).ok());
  ASSERT_TRUE(ja.get().ok());
  ASSERT_TRUE(b.leave(false, "CommError: boom").ok());
  v1::LeaveReply reply;
  ASSERT_TRUE(a.leave(false, "aborted", &reply).ok());
  EXPECT_EQ(reply.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(p.wait(), 1);
  const std::string err = p.err();
  EXPECT_NE(err.find("\nmicroddp: error: rank 1 (host h1) failed: CommError: boom\n"),
            std::string::npos)
      << err;
}

TEST_F(CoordinatorCli, ConfigFileGivesFlagsAndTheCommandLineWins) {
  std::ofstream(dir_ / "job.toml") << "# a job\n"
                                      "world-size = 1\n"
                                      "port = 0\n"
                                      "job-id = \"tomljob\"\n"
                                      "batch = 7\n"
                                      "channels = [4, 8]\n"
                                      "lr = 0.25\n"
                                      "no-eval = true\n"
                                      "ddp = \"hooked\"\n";
  Process p(dir_ / "proc", {"--config", (dir_ / "job.toml").string(), "--batch", "9",
                            "--address-file", (dir_ / "addr").string()});
  const std::string addr = p.address(dir_ / "addr");
  ASSERT_NE(addr, "") << p.err();
  TestClient a(addr);
  v1::JoinRequest req = TestClient::join_request("h0");
  req.set_job_id("tomljob");
  v1::JoinReply reply;
  ASSERT_TRUE(a.join(req, &reply, test::kCallDeadline, "").ok());
  const train::TrainConfig cfg = parse_job_config(reply.job_config_json());
  EXPECT_EQ(cfg.batch, 9) << "the command line wins";
  EXPECT_EQ(cfg.model.channels, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(cfg.optim.lr, 0.25f);
  EXPECT_FALSE(cfg.eval);
  EXPECT_EQ(cfg.dist.ddp, "hooked");
  ASSERT_TRUE(a.leave(true, "").ok());
  EXPECT_EQ(p.wait(), 0) << p.err();
}

TEST_F(CoordinatorCli, BadInputIsOneClearLine) {
  {
    Process p(dir_ / "p1", {"--port", "0"});
    EXPECT_EQ(p.wait(), 1);
    EXPECT_NE(p.err().find("microddp: error: give the number of workers: --world-size N"),
              std::string::npos)
        << p.err();
  }
  {
    std::ofstream(dir_ / "bad.toml") << "wrold-size = 2\n";
    Process p(dir_ / "p2", {"--config", (dir_ / "bad.toml").string()});
    EXPECT_EQ(p.wait(), 1);
    EXPECT_NE(p.err().find("bad.toml: unknown key 'wrold-size'"), std::string::npos) << p.err();
  }
  {
    std::ofstream(dir_ / "broken.toml") << "world-size = = 2\n";
    Process p(dir_ / "p3", {"--config", (dir_ / "broken.toml").string()});
    EXPECT_EQ(p.wait(), 1);
    EXPECT_NE(p.err().find("broken.toml:1:"), std::string::npos) << p.err();
  }
  {
    std::ofstream(dir_ / "choice.toml") << "ddp = \"magic\"\n";
    Process p(dir_ / "p4", {"--world-size", "1", "--config", (dir_ / "choice.toml").string()});
    EXPECT_EQ(p.wait(), 1);
    EXPECT_NE(p.err().find("choice.toml: ddp = magic"), std::string::npos) << p.err();
  }
}

TEST_F(CoordinatorCli, RendezvousTimeoutWithoutWorkersExitsOne) {
  Process p(dir_ / "proc", {"--world-size", "2", "--port", "0", "--rendezvous-timeout-s", "0.5"});
  EXPECT_EQ(p.wait(), 1);
  EXPECT_NE(p.err().find("microddp: error: rendezvous of job 'local' timed out after 500 ms: 0 of "
                         "2 workers joined"),
            std::string::npos)
      << p.err();
}

TEST_F(CoordinatorCli, SigtermEndsTheJobWithOneLine) {
  Process p(dir_ / "proc", base(2));
  const std::string addr = p.address(dir_ / "addr");
  ASSERT_NE(addr, "") << p.err();
  TestClient a(addr);
  auto ja = std::async(std::launch::async, [&] { return a.join("h0", ""); });
  std::this_thread::sleep_for(200ms);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 1);
  const grpc::Status s = ja.get();
  EXPECT_FALSE(s.ok()) << "the waiting worker is answered";
  EXPECT_NE(p.err().find("microddp: error: the coordinator was interrupted (SIGTERM)"),
            std::string::npos)
      << p.err();
}

TEST(FlagConfig, AppliesKeysTheCommandLineDidNotGive) {
  const fs::path file =
      fs::temp_directory_path() / ("mddp_flags_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(file) << "n = 3\nname = \"x\"\nlist = [1, 2]\nflag = true\nratio = 0.5\n";
  CLI::App app;
  int n = 0;
  std::string name;
  std::vector<int> list;
  bool flag = false;
  double ratio = 0;
  app.add_option("--n", n);
  app.add_option("--name", name);
  app.add_option("--list", list);
  app.add_flag("--flag", flag);
  app.add_option("--ratio", ratio);
  app.parse("--name cli", false);
  apply_toml_config(app, file.string());
  EXPECT_EQ(n, 3);
  EXPECT_EQ(name, "cli");
  EXPECT_EQ(list, (std::vector<int>{1, 2}));
  EXPECT_TRUE(flag);
  EXPECT_EQ(ratio, 0.5);
  bool off = true;
  app.add_flag("!--no-off", off);
  std::ofstream(file) << "no-off = true\n";
  apply_toml_config(app, file.string());
  EXPECT_FALSE(off) << "a negated flag set to true turns its value off";
  std::ofstream(file) << "[table]\nn = 1\n";
  EXPECT_THROW(apply_toml_config(app, file.string()), InputError);
  double other = 0;
  app.add_option("--other", other);
  std::ofstream(file) << "other = \"three\"\n";
  EXPECT_THROW(apply_toml_config(app, file.string()), InputError);
  fs::remove(file);
}

}  // namespace
}  // namespace mddp::coordinator
