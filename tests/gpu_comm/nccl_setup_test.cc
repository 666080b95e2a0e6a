// The GPU path's pieces that need no GPU: the NCCL unique id's trip through
// a MemoryStore (threads) and a FileStore (processes), and the refusals a
// user sees when the GPU cannot be used. They run everywhere (label unit).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/file_store.h"
#include "core/comm/memory_store.h"
#include "core/comm/nccl/nccl.h"
#include "core/comm/nccl/transport_log.h"
#include "core/comm/nccl/unique_id.h"
#include "core/tensor/device.h"
#include "core/train/distributed.h"
#include "mddp/config.h"
#include "support/errors.h"
#include "support/ranks.h"

namespace mddp::comm::nccl {
namespace {

using namespace std::chrono_literals;

// 128 bytes, like ncclUniqueId, with every byte value that could trip a text
// store: NUL, newline, quotes, bytes above 0x7f.
std::string fake_id(int salt) {
  std::string id(128, '\0');
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 37 + salt) & 0xff);
  return id;
}

TEST(UniqueId, HexRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(from_hex(to_hex(all), "test"), all);
  EXPECT_EQ(to_hex(std::string("\x00\x7f\xff", 3)), "007fff");
  EXPECT_EQ(from_hex("00AbfF", "test"), std::string("\x00\xab\xff", 3));
  EXPECT_THROW(from_hex("abc", "test"), CommError);
  EXPECT_THROW(from_hex("zz", "test"), CommError);
}

TEST(UniqueId, ThreadsGetRankZerosIdThroughAMemoryStore) {
  MemoryStore store;
  constexpr int kRanks = 4;
  std::vector<std::string> got(kRanks);
  std::atomic<int> created{0};
  mddp::test::run_threads(
      kRanks,
      [&](int rank) {
        got[rank] = exchange_unique_id(
            store, rank, "job/nccl/unique_id", 128,
            [&] {
              ++created;
              return fake_id(7);
            },
            10s);
      },
      30s);
  EXPECT_EQ(created.load(), 1) << "only rank 0 creates the id";
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(got[r], fake_id(7)) << "rank " << r;
}

TEST(UniqueId, ProcessesGetRankZerosIdThroughAFileStore) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mddp-nccl-id-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  mddp::test::run_processes(
      3,
      [&](int rank) {
        FileStore store(dir.string());
        const std::string id = exchange_unique_id(
            store, rank, "nccl/unique_id", 128, [] { return fake_id(3); }, 10s);
        if (id != fake_id(3)) throw Error(str("rank ", rank, " got a different id"));
      },
      60s);
  std::filesystem::remove_all(dir);
}

TEST(UniqueId, AWrongSizedValueIsRefusedWithTheKey) {
  MemoryStore store;
  store.set("k", to_hex("short"));
  try {
    exchange_unique_id(
        store, 1, "k", 128, [] { return std::string(); }, 1s);
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("'k' has 5 bytes, expected 128"), std::string::npos)
        << e.what();
  }
}

TEST(UniqueId, AMissingRankZeroTimesOutNamingTheKey) {
  MemoryStore store;
  try {
    exchange_unique_id(
        store, 2, "job7/nccl/unique_id", 128, [] { return std::string(); }, 100ms);
    FAIL() << "expected TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("job7/nccl/unique_id"), std::string::npos) << e.what();
  }
}

// What a user without a usable GPU sees: one clear InputError, before any
// rendezvous (a MemoryStore nobody else writes to would otherwise time out).
using mddp::test::input_error_of;

TEST(NcclRefusal, ConnectNcclSaysWhyWithoutAGpu) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: nothing to refuse";
  MemoryStore store;
  const std::string msg = input_error_of([&] { connect_nccl(store, 0, 2, NcclOptions{}); });
  if (MDDP_HAVE_CUDA)
    EXPECT_NE(msg.find("NCCL needs a CUDA GPU and none was found"), std::string::npos) << msg;
  else
    EXPECT_NE(msg.find("built without CUDA"), std::string::npos) << msg;
}

TEST(NcclRefusal, DeviceCudaFailsBeforeTheRendezvous) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: nothing to refuse";
  MemoryStore store;
  train::TrainConfig cfg;
  cfg.device = "cuda:0";
  const std::string msg = input_error_of([&] {
    train::connect_process_group(store, 0, 2, {"job", 0, ""}, cfg, "127.0.0.1", "comm");
  });
  EXPECT_NE(msg.find(MDDP_HAVE_CUDA ? "no CUDA GPU found" : "built without CUDA"),
            std::string::npos)
      << msg;
}

// NCCL's INFO lines (the format of NCCL 2.2x) -> the transports by channel
// connections, then the network; lines that name no transport are ignored.
TEST(NcclTransportLog, SummarisesTheTransportsOfNcclsLog) {
  std::istringstream log(
      "gpu1:1234:1234 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n"
      "gpu1:1234:1234 [0] NCCL INFO cudaDriverVersion 13000\n"
      "gpu1:1234:1250 [0] NCCL INFO Using network Socket\n"
      "gpu1:1234:1250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "gpu1:1234:1250 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "gpu1:1234:1250 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0\n"
      "gpu1:1234:1250 [0] NCCL INFO Channel 00/0 : 2[0] -> 1[1] [receive] via NET/Socket/0\r\n"
      "gpu1:1234:1250 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0\n"
      "gpu1:1234:1250 [0] NCCL INFO a line that says via but no channel\n");
  EXPECT_EQ(summarize_nccl_transports(log), "NET/Socket/0 (2), P2P/CUMEM/read (2); network Socket");
  std::istringstream one_rank(
      "gpu1:1:1 [0] NCCL INFO Using network Socket\ngpu1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks "
      "1\n");
  EXPECT_EQ(summarize_nccl_transports(one_rank), "");
  std::istringstream empty("");
  EXPECT_EQ(summarize_nccl_transports(empty), "");
}

// Without the user's NCCL_DEBUG, NCCL's INFO log goes to a file of each
// process's own (NCCL puts the pid in for %p); a child that inherits the
// variables gets its own file, and the user's NCCL_DEBUG is left alone.
// Each case runs in a fresh child: the environment is process-wide.
TEST(NcclTransportLog, CapturesNcclsLogUnlessTheUserSetNcclDebug) {
  EXPECT_EXIT(
      {
        ::unsetenv("NCCL_DEBUG");
        ::unsetenv("MDDP_NCCL_LOG");
        capture_nccl_log();
        const std::string path = nccl_log_path();
        const bool ok = path.find("microddp-nccl-" + std::to_string(::getpid()) + ".log") !=
                            std::string::npos &&
                        std::string(std::getenv("NCCL_DEBUG")) == "INFO" &&
                        std::string(std::getenv("NCCL_DEBUG_FILE")).find("%p") != std::string::npos;
        capture_nccl_log();  // idempotent
        std::exit(ok && nccl_log_path() == path ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::setenv("NCCL_DEBUG", "WARN", 1);
        ::unsetenv("MDDP_NCCL_LOG");
        capture_nccl_log();
        std::exit(nccl_log_path().empty() && std::string(std::getenv("NCCL_DEBUG")) == "WARN" ? 0
                                                                                              : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mddp::comm::nccl
