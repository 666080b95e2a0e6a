// A coordinator Job of two ranks (joined, heartbeating) served by a real
// dashboard Server on 127.0.0.1, port 0, fed synthetic metrics records.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/job.h"
#include "dashboard/server/server.h"

namespace mddp::dashboard::test {

class DashboardTest : public ::testing::Test {
 public:
  static constexpr int kWorld = 2;

 protected:
  DashboardTest();
  ~DashboardTest() override;

  // Steps [first, first + count), one training record per rank each (only
  // rank `only_rank`'s when given).
  void feed(int64_t first, int64_t count, int only_rank = -1);
  // (Re)starts the server, serving the page from `dir` ("" = compiled in),
  // closing connections idle for `idle_timeout`.
  void serve(const std::filesystem::path& dir = {},
             std::chrono::milliseconds idle_timeout = ServerOptions{}.idle_timeout);
  int port() const { return server_->port(); }

  coordinator::Job job_;
  std::array<std::string, kWorld> sessions_;
  std::unique_ptr<Server> server_;
};

}  // namespace mddp::dashboard::test
