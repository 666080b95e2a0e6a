#include "client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace mddp::dashboard::test {
namespace {

// run_async, throwing its error.
template <class Start>
void run_bounded(net::io_context& ioc, Start start) {
  if (const beast::error_code ec = run_async(ioc, start)) throw beast::system_error(ec);
}

}  // namespace

int connect_from(int port, const std::string& from) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("connect from " + from + " failed");
  }
  return fd;
}

bool closed_by_server(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

std::string raw_exchange(int port, const std::string& bytes, std::chrono::milliseconds timeout,
                         const std::string& from) {
  const int fd = connect_from(port, from);
  // The server may answer and close before it read everything (an oversized
  // header): a failed send is part of the test, not an error.
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string out;
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

int status_of(const std::string& r) {
  if (r.rfind("HTTP/1.", 0) != 0 || r.size() < 12) return -1;
  return std::stoi(r.substr(9, 3));
}

http::response<http::string_body> request(int port, const std::string& target, http::verb verb) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(10));  // the whole exchange
  const tcp::endpoint server(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  run_bounded(ioc, [&](auto done) { stream.async_connect(server, done); });
  http::request<http::empty_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  run_bounded(ioc, [&](auto done) { http::async_write(stream, req, done); });
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  parser.skip(verb == http::verb::head);
  run_bounded(ioc, [&](auto done) { http::async_read(stream, buffer, parser, done); });
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return parser.release();
}

StreamClient::StreamClient(int port) : ws_(ioc_) {
  beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(10));
  const tcp::endpoint server(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  run_bounded(ioc_, [&](auto done) { beast::get_lowest_layer(ws_).async_connect(server, done); });
  run_bounded(ioc_, [&](auto done) { ws_.async_handshake("127.0.0.1", "/api/stream", done); });
  ws_.read_message_max(64 << 20);
}

std::string StreamClient::read(std::chrono::milliseconds timeout) {
  beast::get_lowest_layer(ws_).expires_after(timeout);
  beast::flat_buffer buffer;
  run_bounded(ioc_, [&](auto done) { ws_.async_read(buffer, done); });
  return beast::buffers_to_string(buffer.data());
}

}  // namespace mddp::dashboard::test
