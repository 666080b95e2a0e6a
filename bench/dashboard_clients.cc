// dashboard_clients: N WebSocket clients of a dashboard's /api/stream, all
// reading every frame as a browser would, until SIGINT/SIGTERM, --seconds,
// or the server goes away. Prints one JSON line: clients connected, frames
// and bytes received. bench/dashboard_load.sh runs it next to a job.
//
//   dashboard_clients --port 8080 --clients 50 [--host 127.0.0.1] [--seconds 0]
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

struct Totals {
  int connected = 0, done = 0;  // done: closed, failed to connect, or dropped
  long long frames = 0, bytes = 0;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(net::io_context& ioc, Totals& t) : ws_(ioc), totals_(t) {}
  void start(const tcp::endpoint& ep, const std::string& host) {
    ws_.next_layer().async_connect(ep, [self = shared_from_this(), host](beast::error_code ec) {
      if (ec) return void(++self->totals_.done);
      self->ws_.async_handshake(host, "/api/stream", [self](beast::error_code ec) {
        if (ec) return void(++self->totals_.done);
        ++self->totals_.connected;
        self->read();
      });
    });
  }
  void close() {
    beast::error_code ignored;
    ws_.next_layer().close(ignored);
  }

 private:
  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) return void(++self->totals_.done);
      ++self->totals_.frames;
      self->totals_.bytes += static_cast<long long>(n);
      self->buffer_.consume(self->buffer_.size());
      self->read();
    });
  }

  beast::websocket::stream<tcp::socket> ws_;
  beast::flat_buffer buffer_;
  Totals& totals_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0, clients = 50;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--host"))
      host = argv[i + 1];
    else if (!std::strcmp(argv[i], "--port"))
      port = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--clients"))
      clients = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
  }
  if (port <= 0) {
    std::fprintf(stderr,
                 "usage: dashboard_clients --port P [--clients N] [--host H] [--seconds S]\n");
    return 2;
  }
  net::io_context ioc{1};
  Totals totals;
  const tcp::endpoint ep(net::ip::make_address(host), static_cast<unsigned short>(port));
  std::vector<std::shared_ptr<Client>> all;
  for (int i = 0; i < clients; ++i) {
    all.push_back(std::make_shared<Client>(ioc, totals));
    all.back()->start(ep, host);
  }
  auto stop = [&] {
    for (auto& c : all) c->close();
  };
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) { stop(); });
  net::steady_timer timer(ioc);
  if (seconds > 0) {
    timer.expires_after(std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
    timer.async_wait([&](beast::error_code ec) {
      if (!ec) stop();
    });
  }
  // Ends when every client is done (stopped, or the server went away).
  net::steady_timer watch(ioc);
  std::function<void()> check = [&] {
    watch.expires_after(std::chrono::milliseconds(200));
    watch.async_wait([&](beast::error_code) {
      if (totals.done == clients) {
        signals.cancel();
        timer.cancel();
        return;
      }
      check();
    });
  };
  check();
  ioc.run();
  std::printf("{\"clients\": %d, \"connected\": %d, \"frames\": %lld, \"bytes\": %lld}\n", clients,
              totals.connected, totals.frames, totals.bytes);
  return totals.connected == clients ? 0 : 1;
}
