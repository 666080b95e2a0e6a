// Clients of the dashboard server for the tests, over real sockets: raw
// bytes (for requests no well-behaved client sends), a Beast HTTP GET, and a
// Beast WebSocket reader. Every call is bounded by a timeout.
#pragma once

#include <chrono>
#include <string>

#include "dashboard/server/beast.h"

namespace mddp::dashboard::test {

// A socket connected to 127.0.0.1:port from the local address `from`
// (any of 127.0.0.0/8: a distinct client address on loopback).
int connect_from(int port, const std::string& from);

// Whether the server closed `fd` (end of stream or reset) within `timeout`.
bool closed_by_server(int fd, std::chrono::milliseconds timeout);

// Sends `bytes` to 127.0.0.1:port from `from` and returns everything read
// until the server closes (or `timeout`).
std::string raw_exchange(int port, const std::string& bytes,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10),
                         const std::string& from = "127.0.0.1");

// The status line's code of a raw response ("HTTP/1.1 404 ..." -> 404), -1 if none.
int status_of(const std::string& raw_response);

// Runs one asynchronous operation on `ioc` to its end and returns its error:
// start(done) begins it with `done` as its handler. The clients work
// asynchronously because Beast's deadlines (tcp_stream's expires_after)
// bound asynchronous operations only: a blocking read from a server that
// never answers would wait until CTest's timeout.
template <class Start>
beast::error_code run_async(net::io_context& ioc, Start start) {
  beast::error_code ec;
  start([&](beast::error_code e, auto&&...) { ec = e; });
  ioc.restart();
  ioc.run();
  return ec;
}

// GET (or another verb) `target` on 127.0.0.1:port.
http::response<http::string_body> request(int port, const std::string& target,
                                          http::verb verb = http::verb::get);

// A WebSocket client of /api/stream.
class StreamClient {
 public:
  explicit StreamClient(int port);
  // The next text frame; throws on timeout or error.
  std::string read(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  net::io_context ioc_;
  websocket::stream<beast::tcp_stream> ws_;
};

}  // namespace mddp::dashboard::test
