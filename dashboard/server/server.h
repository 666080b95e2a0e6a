// The dashboard server: the page, the JSON API, the /api/stream WebSocket,
// /metrics and /api/trace of dashboard/API.md, over HTTP on host:port, for
// one coordinator Job.
//
//   dashboard::Server dash({.host = "127.0.0.1", .port = 0}, coordinator.job());
//   std::printf("dashboard: http://127.0.0.1:%d/\n", dash.port());
//
// Read-only. With a token (auth.h) every request must carry it; without
// one, bind 127.0.0.1 unless the network is trusted. With `tls`, HTTPS
// (and wss://) only, with the control plane's certificate. All its work (sockets, JSON, polling the
// metrics log) runs on its own io thread; the job is only read, through its thread-safe accessors,
// so a slow or hostile client never blocks coordination or training. Beast is hidden behind this
// header.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "control/tls.h"
#include "coordinator/job.h"

namespace mddp::dashboard {

struct ServerOptions {
  std::string host = "127.0.0.1";           // an address or a name to resolve
  int port = 0;                             // 0: any free port (see port())
  std::filesystem::path dashboard_dir;      // "": the compiled-in page; else served from here
  std::string token{};                      // "": no authentication; else see auth.h
  std::optional<control::TlsConfig> tls{};  // HTTPS with its cert and key; nullopt: HTTP
  // A connection that has not sent a whole request header this long after
  // it opened (or after its last answer) is closed (connections.h).
  std::chrono::milliseconds idle_timeout{5000};
};

class Server {
 public:
  // Binds and starts serving `job`, which must outlive the server. Throws
  // mddp::Error when it cannot listen, InputError for a bad dashboard_dir.
  Server(ServerOptions options, const coordinator::Job& job);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;  // the bound port (the chosen one when asked for 0)
  // "https://HOST:PORT/" or "http://..." for `host` (a name clients dial),
  // and the same with "login?token=..." when the server has a token.
  std::string url(const std::string& host) const;
  std::string login_url(const std::string& host) const;
  // Closes every connection (WebSocket clients get a "going away" close,
  // bounded to a second) and joins the io thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mddp::dashboard
