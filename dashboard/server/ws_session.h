// One /api/stream client: a WebSocket that the server writes to and reads
// only to answer control frames (what the client sends is discarded, at
// most 4 KiB a message). Frames wait in the session's own queue; a client
// whose queue exceeds 4 MiB has fallen behind and is dropped, so a slow or
// stalled browser never holds up the others or the server. Owned by its
// pending operations (shared_from_this); io thread only.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "dashboard/server/beast.h"
#include "dashboard/server/tls_stream.h"

namespace mddp::dashboard {

struct ServerContext;

class WsSession : public std::enable_shared_from_this<WsSession> {
 public:
  static constexpr std::size_t kMaxQueueBytes = 4 << 20;
  static constexpr std::size_t kMaxIncomingBytes = 4 << 10;

  // `address`: the client's, for the per-address bound (connections.h).
  WsSession(TlsStream&& stream, std::shared_ptr<ServerContext> ctx, std::string address);
  ~WsSession();

  // Completes the upgrade `request` asked for, then joins the stream.
  void start(http::request<http::empty_body> request);
  // Queues one text frame; drops the client when the queue is over its bound.
  void send(std::shared_ptr<const std::string> frame);
  // A close handshake ("going away"), bounded to a second; for shutdown.
  void close();

 private:
  void on_accept(beast::error_code ec);
  void do_read();
  void on_read(beast::error_code ec, std::size_t bytes);
  void do_write();
  void on_write(beast::error_code ec, std::size_t bytes);
  void drop();

  websocket::stream<TlsStream> ws_;
  std::shared_ptr<ServerContext> ctx_;
  beast::flat_buffer incoming_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  std::size_t queued_bytes_ = 0;
  bool accepted_ = false, writing_ = false, closed_ = false;
  const std::string address_;
  uint64_t connection_id_ = 0;
};

}  // namespace mddp::dashboard
