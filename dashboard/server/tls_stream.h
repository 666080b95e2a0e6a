// A connection's byte stream: plain TCP, or TLS over it when the server has
// a certificate (ServerOptions::tls: HTTPS and wss://). One type for both,
// so the sessions are written once: reads and writes go to whichever the
// connection has, and the TCP layer (timeouts, close) is always at hand.
// Beast's HTTP and WebSocket code take it like any of its streams
// (AsyncReadStream, AsyncWriteStream, and the teardown of a WebSocket close).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "control/tls.h"
#include "dashboard/server/beast.h"

namespace mddp::dashboard {

namespace ssl = net::ssl;

// The server side of TLS 1.2+ with the coordinator's certificate and key.
// Throws InputError when OpenSSL refuses them.
std::unique_ptr<ssl::context> make_tls_context(const control::TlsConfig& tls);

class TlsStream {
 public:
  using executor_type = beast::tcp_stream::executor_type;

  // `tls` null: plain TCP. The context must outlive the stream.
  TlsStream(tcp::socket&& socket, ssl::context* tls) : stream_(make(std::move(socket), tls)) {}

  bool is_tls() const { return std::holds_alternative<Tls>(stream_); }
  executor_type get_executor() { return tcp_layer().get_executor(); }
  beast::tcp_stream& tcp_layer() {
    return is_tls() ? std::get<Tls>(stream_).next_layer() : std::get<beast::tcp_stream>(stream_);
  }
  // The TCP layer's, so code written for a beast::tcp_stream reads the same.
  template <class Duration>
  void expires_after(Duration d) {
    tcp_layer().expires_after(d);
  }
  void expires_never() { tcp_layer().expires_never(); }
  tcp::socket& socket() { return tcp_layer().socket(); }
  void close() {
    tcp_layer().close();
  }  // TLS too: no close_notify (a response is length-delimited)

  // The server's TLS handshake; completes at once (no error) on plain TCP.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    if (is_tls())
      std::get<Tls>(stream_).async_handshake(ssl::stream_base::server,
                                             std::forward<Handler>(handler));
    else
      net::post(get_executor(),
                beast::bind_front_handler(std::forward<Handler>(handler), beast::error_code{}));
  }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    std::visit([&](auto& s) { s.async_read_some(buffers, std::forward<Handler>(handler)); },
               stream_);
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    std::visit([&](auto& s) { s.async_write_some(buffers, std::forward<Handler>(handler)); },
               stream_);
  }

  // What beast::close_socket does to it (a WebSocket's timeout): the TCP close.
  friend void beast_close_socket(TlsStream& s) { s.close(); }
  // A WebSocket's close on this stream: the layer's own teardown.
  template <class Handler>
  friend void async_teardown(beast::role_type role, TlsStream& s, Handler&& handler) {
    std::visit(
        [&](auto& layer) {
          using websocket::async_teardown;
          async_teardown(role, layer, std::forward<Handler>(handler));
        },
        s.stream_);
  }
  friend void teardown(beast::role_type role, TlsStream& s, beast::error_code& ec) {
    std::visit(
        [&](auto& layer) {
          using websocket::teardown;
          teardown(role, layer, ec);
        },
        s.stream_);
  }

 private:
  using Tls = beast::ssl_stream<beast::tcp_stream>;
  using Variant = std::variant<beast::tcp_stream, Tls>;
  static Variant make(tcp::socket&& socket, ssl::context* tls) {
    if (tls) return Variant(std::in_place_type<Tls>, beast::tcp_stream(std::move(socket)), *tls);
    return Variant(std::in_place_type<beast::tcp_stream>, std::move(socket));
  }
  Variant stream_;
};

}  // namespace mddp::dashboard
