#include "dashboard/server/ws_session.h"

#include "dashboard/server/server_context.h"

namespace mddp::dashboard {

WsSession::WsSession(TlsStream&& stream, std::shared_ptr<ServerContext> ctx, std::string address)
    : ws_(std::move(stream)), ctx_(std::move(ctx)), address_(std::move(address)) {}

WsSession::~WsSession() {
  ctx_->connections.remove(connection_id_);
}

void WsSession::start(http::request<http::empty_body> request) {
  connection_id_ =
      ctx_->connections.add(address_, Connections::State::kStream, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->close();
      });
  // The websocket stream keeps its own timers (handshake, idle with pings):
  // the TCP stream's must be off.
  beast::get_lowest_layer(ws_).expires_never();
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "microddp"); }));
  ws_.read_message_max(kMaxIncomingBytes);
  ws_.text(true);
  // By default Beast cuts a message into 4 KiB frames, one write each: a
  // 100 KiB metrics frame to 50 clients would be 1,250 writes. One frame per
  // message is one write per client.
  ws_.auto_fragment(false);
  ws_.async_accept(request, beast::bind_front_handler(&WsSession::on_accept, shared_from_this()));
}

void WsSession::on_accept(beast::error_code ec) {
  if (ec) return;
  accepted_ = true;
  ctx_->stream.join(shared_from_this());
  do_read();
}

void WsSession::do_read() {
  ws_.async_read(incoming_, beast::bind_front_handler(&WsSession::on_read, shared_from_this()));
}

void WsSession::on_read(beast::error_code ec, std::size_t) {
  if (ec) {  // closed, timed out, or the client sent more than kMaxIncomingBytes
    closed_ = true;
    return;
  }
  incoming_.consume(incoming_.size());
  do_read();
}

void WsSession::send(std::shared_ptr<const std::string> frame) {
  if (closed_) return;
  if (queued_bytes_ + frame->size() > kMaxQueueBytes) return drop();
  queued_bytes_ += frame->size();
  queue_.push_back(std::move(frame));
  if (!writing_) do_write();
}

void WsSession::do_write() {
  writing_ = true;
  ws_.async_write(net::buffer(*queue_.front()),
                  beast::bind_front_handler(&WsSession::on_write, shared_from_this()));
}

void WsSession::on_write(beast::error_code ec, std::size_t) {
  writing_ = false;
  queued_bytes_ -= queue_.front()->size();
  queue_.pop_front();
  if (ec) return drop();
  if (!queue_.empty() && !closed_) do_write();
}

void WsSession::drop() {
  closed_ = true;
  // The frame being written must outlive the write; the others can go now.
  const std::size_t keep = writing_ ? 1 : 0;
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(keep), queue_.end());
  queued_bytes_ = keep ? queue_.front()->size() : 0;
  beast::error_code ignored;
  beast::get_lowest_layer(ws_).socket().close(ignored);  // pending operations end with an error
}

void WsSession::close() {
  if (closed_) return;
  if (!accepted_) return drop();
  closed_ = true;
  ws_.set_option(
      websocket::stream_base::timeout{std::chrono::seconds(1), std::chrono::seconds(1), false});
  ws_.async_close(websocket::close_code::going_away,
                  [self = shared_from_this()](beast::error_code) { self->drop(); });
}

}  // namespace mddp::dashboard
