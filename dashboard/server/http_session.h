// One HTTP connection (plain, or HTTPS after a TLS handshake bounded like a
// request header: tls_stream.h): reads requests (header at most 8 KiB, no
// body, the whole header within ServerOptions::idle_timeout, 5 s: a
// connection that sends nothing, or its header too slowly, is idle and
// closed then, or sooner when a new client needs its room, connections.h),
// answers GET and HEAD through routes.h (30 s to take each answer), keeps the
// connection alive when the client asks, and hands /api/stream upgrades to
// a WsSession. Every request passes auth.h first (401 without the
// dashboard's token, when it has one). Anything else gets its status and the connection is closed:
// 405 for another method, 413 for a body, 431 for an oversized header, 400
// for a malformed request. Owned by its pending operation
// (shared_from_this); io thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "dashboard/server/beast.h"
#include "dashboard/server/routes.h"
#include "dashboard/server/tls_stream.h"

namespace mddp::dashboard {

struct ServerContext;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  static constexpr std::uint32_t kMaxHeaderBytes = 8 << 10;
  static constexpr std::chrono::seconds kWriteTimeout{30};

  // `address`: the client's, for the per-address bound (connections.h).
  HttpSession(tcp::socket&& socket, std::shared_ptr<ServerContext> ctx, std::string address);
  ~HttpSession();
  void start();

 private:
  using Response = http::response<http::string_body>;

  void on_handshake(beast::error_code ec);
  void do_read();
  void on_read(beast::error_code ec, std::size_t bytes);
  // `refusal`: what auth.h answers instead of the route, when it refused.
  void answer(const http::request<http::empty_body>& req, const std::optional<Reply>& refusal);
  void reply_error(http::status status, const char* why);  // then closes
  void write(Response res);
  void on_write(bool keep_alive, beast::error_code ec, std::size_t bytes);
  void close();

  TlsStream stream_;
  std::shared_ptr<ServerContext> ctx_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  std::shared_ptr<Response> response_;  // alive while it is being written
  const std::string address_;
  uint64_t connection_id_ = 0;
};

}  // namespace mddp::dashboard
