#include "dashboard/server/server.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "core/common/check.h"
#include "dashboard/server/beast.h"
#include "dashboard/server/listener.h"
#include "dashboard/server/server_context.h"

namespace mddp::dashboard {

struct Server::Impl {
  net::io_context ioc{1};
  std::shared_ptr<ServerContext> ctx;
  std::shared_ptr<Listener> listener;
  std::string token;
  std::thread thread;
};

namespace {

tcp::endpoint resolve(net::io_context& ioc, const ServerOptions& o) {
  if (o.port < 0 || o.port > 65535)
    throw InputError(str("--http-port must be in 0..65535 (or -1: no dashboard), got ", o.port));
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto results = resolver.resolve(
      o.host, std::to_string(o.port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    throw Error(str("the dashboard cannot listen on host '", o.host,
                    "': ", ec ? ec.message() : "no address", " (check --http-host)"));
  return results.begin()->endpoint();
}

}  // namespace

Server::Server(ServerOptions options, const coordinator::Job& job)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.ctx = std::make_shared<ServerContext>(job, options.dashboard_dir, options.idle_timeout, s.ioc);
  if (options.tls) s.ctx->tls = make_tls_context(*options.tls);
  s.listener = std::make_shared<Listener>(s.ioc, resolve(s.ioc, options), s.ctx);
  // Cookies are per host, not per port: each server its own cookie name.
  if (!options.token.empty())
    s.ctx->auth =
        Auth(options.token, str("microddp_", s.listener->port()), options.tls.has_value());
  s.token = options.token;
  s.listener->start();
  s.ctx->stream.start();
  s.thread = std::thread([&s] {
    // A handler that throws (out of memory, a bug) is logged; serving goes on.
    for (;;) {
      try {
        s.ioc.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("dashboard server: {}", e.what());
      }
    }
  });
}

Server::~Server() {
  stop();
}

int Server::port() const {
  return impl_->listener->port();
}

std::string Server::url(const std::string& host) const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return str(impl_->ctx->tls ? "https://" : "http://", h, ":", port(), "/");
}

std::string Server::login_url(const std::string& host) const {
  return impl_->token.empty() ? url(host) : url(host) + "login?token=" + impl_->token;
}

void Server::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  // On the io thread: once the acceptor, the poll timer and every connection
  // are closed, no work is left and run() returns.
  net::post(s.ioc, [&s] {
    s.listener->stop();
    s.ctx->stream.stop();
    s.ctx->connections.close_all();
  });
  s.thread.join();
}

}  // namespace mddp::dashboard
