// What every session of the server shares: the job, its Tracker, the page's
// files, the open connections and the /api/stream feed. Owned by the Server,
// held by each session through a shared_ptr; used on the io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <memory>

#include "coordinator/job.h"
#include "dashboard/server/auth.h"
#include "dashboard/server/connections.h"
#include "dashboard/server/routes.h"
#include "dashboard/server/static_files.h"
#include "dashboard/server/stream.h"
#include "dashboard/server/tls_stream.h"
#include "dashboard/server/tracker.h"

namespace mddp::dashboard {

struct ServerContext {
  ServerContext(const coordinator::Job& j, const std::filesystem::path& dashboard_dir,
                std::chrono::milliseconds idle, boost::asio::io_context& ioc)
      : job(j), tracker(j), files(dashboard_dir), idle_timeout(idle), stream(ioc, j, tracker) {}

  // What a request sees: first the records that arrived since the last poll
  // are folded in, so an answer is never a poll period behind the log.
  RouteContext routes() {
    stream.drain();
    return {job, tracker, files};
  }

  const coordinator::Job& job;
  Tracker tracker;
  StaticFiles files;
  const std::chrono::milliseconds idle_timeout;  // ServerOptions::idle_timeout
  Connections connections;
  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  Auth auth;                          // no token: every request passes
  Stream stream;
};

}  // namespace mddp::dashboard
