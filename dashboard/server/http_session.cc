#include "dashboard/server/http_session.h"

#include "dashboard/server/routes.h"
#include "dashboard/server/server_context.h"
#include "dashboard/server/ws_session.h"

namespace mddp::dashboard {

namespace {
constexpr std::string_view kStreamPath = "/api/stream";

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

bool is_stream_upgrade(const http::request<http::empty_body>& req) {
  return path_of(req.target()) == kStreamPath && websocket::is_upgrade(req);
}
}  // namespace

HttpSession::HttpSession(tcp::socket&& socket, std::shared_ptr<ServerContext> ctx,
                         std::string address)
    : stream_(std::move(socket), ctx->tls.get()),
      ctx_(std::move(ctx)),
      address_(std::move(address)) {}

HttpSession::~HttpSession() {
  ctx_->connections.remove(connection_id_);
}

void HttpSession::start() {
  connection_id_ =
      ctx_->connections.add(address_, Connections::State::kIdle, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->close();
      });
  if (!stream_.is_tls()) return do_read();
  stream_.expires_after(ctx_->idle_timeout);  // the handshake is bounded like a request header
  stream_.async_handshake(
      beast::bind_front_handler(&HttpSession::on_handshake, shared_from_this()));
}

void HttpSession::on_handshake(beast::error_code ec) {
  if (ec) return close();  // not TLS, or a certificate the client refused: nothing to answer
  do_read();
}

void HttpSession::do_read() {
  ctx_->connections.set_state(connection_id_, Connections::State::kIdle);
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(0);
  stream_.expires_after(ctx_->idle_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, std::size_t) {
  if (ec == http::error::header_limit)
    return reply_error(http::status::request_header_fields_too_large,
                       "the request header is over 8 KiB\n");
  if (ec == http::error::body_limit || ec == http::error::unexpected_body)
    return reply_error(http::status::payload_too_large, "requests take no body\n");
  if (ec == http::error::end_of_stream ||
      (ec && ec.category() != http::make_error_code(http::error::bad_target).category()))
    return close();  // the client went away, or was too slow, or the socket failed
  if (ec) return reply_error(http::status::bad_request, "malformed request\n");

  ctx_->connections.set_state(connection_id_, Connections::State::kBusy);
  http::request<http::empty_body> req = parser_->release();
  if (req.method() != http::verb::get && req.method() != http::verb::head)
    return reply_error(http::status::method_not_allowed, "read-only: only GET and HEAD\n");
  const std::optional<Reply> refusal = ctx_->auth.check(
      {req.target(), req[http::field::cookie], req[http::field::authorization],
       req[http::field::origin], req[http::field::host], is_stream_upgrade(req), address_});
  if (!refusal && is_stream_upgrade(req)) {
    // The stream moves to the WebSocket session; this one ends here.
    std::make_shared<WsSession>(std::move(stream_), ctx_, address_)->start(std::move(req));
    return;
  }
  answer(req, refusal);
}

void HttpSession::answer(const http::request<http::empty_body>& req,
                         const std::optional<Reply>& refusal) {
  Reply r;
  if (refusal)
    r = *refusal;
  else if (path_of(req.target()) == kStreamPath)
    r = {426, "text/plain", "/api/stream is a WebSocket\n", {{"Upgrade", "websocket"}}};
  else
    r = route(req.target(), ctx_->routes());
  Response res{static_cast<http::status>(r.status), req.version()};
  res.set(http::field::server, "microddp");
  res.set(http::field::content_type, r.content_type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  for (const auto& [name, value] : r.headers) res.set(name, value);
  res.keep_alive(req.keep_alive());
  res.content_length(r.body.size());
  if (req.method() != http::verb::head) res.body() = std::move(r.body);
  write(std::move(res));
}

void HttpSession::reply_error(http::status status, const char* why) {
  ctx_->connections.set_state(connection_id_, Connections::State::kBusy);
  Response res{status, 11};
  res.set(http::field::server, "microddp");
  res.set(http::field::content_type, "text/plain");
  if (status == http::status::method_not_allowed) res.set(http::field::allow, "GET, HEAD");
  res.keep_alive(false);
  res.body() = why;
  res.prepare_payload();
  write(std::move(res));
}

void HttpSession::write(Response res) {
  response_ = std::make_shared<Response>(std::move(res));
  stream_.expires_after(kWriteTimeout);
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&HttpSession::on_write, shared_from_this(),
                                              response_->keep_alive()));
}

void HttpSession::on_write(bool keep_alive, beast::error_code ec, std::size_t) {
  response_.reset();
  if (ec || !keep_alive) return close();
  do_read();
}

void HttpSession::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.close();
}

}  // namespace mddp::dashboard
