// MemoryStore and FileStore: set/get, overwrite, odd keys, timeouts naming the
// key, and visibility across threads and processes.
#include <gtest/gtest.h>

#include <memory>

#include "core/comm/file_store.h"
#include "core/comm/memory_store.h"
#include "core/comm/types.h"
#include "support/files.h"
#include "support/ranks.h"

namespace mddp::comm {
namespace {

using namespace std::chrono_literals;
using test::run_processes;
using test::run_threads;
using test::TempDir;

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Store> make() {
    if (GetParam() == "memory") return std::make_unique<MemoryStore>();
    return std::make_unique<FileStore>(dir_.path());
  }
  TempDir dir_;
};

TEST_P(StoreTest, SetThenGetReturnsValue) {
  auto store = make();
  store->set("a", "1");
  store->set("comm/addr/0", std::string("x\0y", 3));
  store->set("", "empty key");
  store->set("../..//.hidden %2f", "odd key");
  EXPECT_EQ(store->get("a", 1s), "1");
  EXPECT_EQ(store->get("comm/addr/0", 1s), std::string("x\0y", 3));
  EXPECT_EQ(store->get("", 1s), "empty key");
  EXPECT_EQ(store->get("../..//.hidden %2f", 1s), "odd key");
  store->set("a", "");
  EXPECT_EQ(store->get("a", 1s), "");
  store->set("a", "2");
  EXPECT_EQ(store->get("a", 1s), "2");
}

TEST_P(StoreTest, GetOfMissingKeyTimesOutNamingTheKey) {
  auto store = make();
  auto start = Clock::now();
  try {
    store->get("comm/addr/3", 50ms);
    FAIL() << "expected TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("comm/addr/3"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST_P(StoreTest, GetWaitsForALaterSetFromAnotherThread) {
  auto store = make();
  run_threads(
      4,
      [&](int rank) {
        store->set("k/" + std::to_string(rank), std::string(1000, static_cast<char>('a' + rank)));
        for (int peer = 0; peer < 4; ++peer)
          EXPECT_EQ(store->get("k/" + std::to_string(peer), 10s),
                    std::string(1000, static_cast<char>('a' + peer)));
      },
      30s);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("memory", "file"),
                         [](const auto& info) { return info.param; });

TEST(FileStoreTest, ProcessesSeeEachOthersKeys) {
  TempDir dir;
  run_processes(
      3,
      [&](int rank) {
        FileStore store(dir.path());
        store.set("rank/" + std::to_string(rank), std::to_string(rank * 10));
        for (int peer = 0; peer < 3; ++peer)
          if (store.get("rank/" + std::to_string(peer), 10s) != std::to_string(peer * 10))
            throw std::runtime_error("wrong value");
      },
      30s);
}

TEST(FileStoreTest, MissingDirectoryIsAnInputError) {
  EXPECT_THROW(FileStore("/nonexistent/mddp/dir"), InputError);
}

TEST(TypesTest, ParseAndPrintRoundTrip) {
  for (auto s : {"fp32", "fp16", "bf16"}) EXPECT_STREQ(to_string(parse_dtype(s)), s);
  for (auto s : {"sum", "avg", "max", "min"}) EXPECT_STREQ(to_string(parse_reduce_op(s)), s);
  for (auto s : {"auto", "ring", "naive", "tree", "doubling", "hierarchical"})
    EXPECT_STREQ(to_string(parse_algorithm(s)), s);
  for (auto s : {"auto", "tcp", "shm"}) EXPECT_STREQ(to_string(parse_transport(s)), s);
  EXPECT_EQ(element_size(DataType::kFloat32), 4u);
  EXPECT_EQ(element_size(DataType::kBFloat16), 2u);
  try {
    parse_transport("udp");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("auto, tcp, shm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mddp::comm
