// dashboard_clients: N simulated dashboard pages. Each reads every frame of
// /api/stream, and polls /api/timeline and /api/stragglers?steps=50 once a
// second on one keep-alive connection (the next poll a second after the
// last answer, as dashboard/web/app.js does), until SIGINT/SIGTERM,
// --seconds, or the server goes away. Prints one JSON line: clients
// connected, dropped, frames and bytes received, polls answered (200, or 404
// before the first complete step), failed polls, other answers.
// bench/dashboard_load.sh runs it next to a job.
//
// Exit status 0 when every client connected and kept its stream to the end
// (the server's "going away" close at shutdown, or our own stop) and no poll
// got an answer other than 200 or 404; 1 otherwise (stderr says which).
// Failed polls (a connection the server closed at shutdown) are only counted.
//
//   dashboard_clients --port 8080 --clients 50 [--host 127.0.0.1] [--seconds 0]
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::chrono::seconds kPollPeriod{1};
constexpr std::chrono::seconds kPollTimeout{10};
constexpr const char* kPollTargets[] = {"/api/timeline", "/api/stragglers?steps=50"};
constexpr int kMaxNotes = 10;  // lines on stderr about single clients; then only counted

struct Totals {
  int connected = 0, done = 0;  // done: stopped, failed to connect, or ended
  int dropped = 0;              // the stream ended before the server's shutdown or our stop
  long long frames = 0, bytes = 0;
  long long polls = 0, poll_errors = 0, bad_answers = 0;
  int notes = 0;
};

void note(Totals& t, const std::string& line) {
  if (++t.notes <= kMaxNotes) std::fprintf(stderr, "%s\n", line.c_str());
}

class Client : public std::enable_shared_from_this<Client> {
 public:
  Client(net::io_context& ioc, int id, Totals& t)
      : id_(id), ws_(ioc), http_(ioc), poll_timer_(ioc), totals_(t) {}

  void start(const tcp::endpoint& ep, const std::string& host) {
    ep_ = ep;
    host_ = host;
    ws_.next_layer().async_connect(ep, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->failed_to_connect(ec);
      self->ws_.async_handshake(self->host_, "/api/stream", [self](beast::error_code ec2) {
        if (ec2) return self->failed_to_connect(ec2);
        ++self->totals_.connected;
        self->read();
        self->poll(0);
      });
    });
  }

  // Ours: the client ends without counting as dropped.
  void stop() {
    stopping_ = true;
    beast::error_code ignored;
    ws_.next_layer().close(ignored);
    end_polling();
  }

 private:
  void failed_to_connect(beast::error_code ec) {
    note(totals_, "client " + std::to_string(id_) + ": cannot open /api/stream: " + ec.message());
    ++totals_.done;
  }

  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) return self->ended(ec);
      ++self->totals_.frames;
      self->totals_.bytes += static_cast<long long>(n);
      self->buffer_.consume(self->buffer_.size());
      self->read();
    });
  }

  // The stream ended: fine when the server shut down ("going away") or we stopped.
  void ended(beast::error_code ec) {
    const bool shutdown =
        ec == websocket::error::closed && ws_.reason().code == websocket::close_code::going_away;
    if (!stopping_ && !shutdown) {
      ++totals_.dropped;
      note(totals_, "client " + std::to_string(id_) +
                        ": the stream ended before the server shut down: " + ec.message());
    }
    ++totals_.done;
    end_polling();
  }

  void end_polling() {
    polling_ = false;
    poll_timer_.cancel();
    http_.close();
  }

  // GET kPollTargets[which], then the next one; a second after the last, again.
  void poll(std::size_t which) {
    if (!polling_) return;
    if (!http_open_) {
      http_.expires_after(kPollTimeout);
      http_.async_connect(ep_, [self = shared_from_this(), which](beast::error_code ec) {
        if (ec) return self->poll_failed();
        self->http_open_ = true;
        self->poll(which);
      });
      return;
    }
    request_ = http::request<http::empty_body>{http::verb::get, kPollTargets[which], 11};
    request_.set(http::field::host, host_);
    response_ = {};
    http_.expires_after(kPollTimeout);
    http::async_write(http_, request_,
                      [self = shared_from_this(), which](beast::error_code ec, std::size_t) {
                        if (ec) return self->poll_failed();
                        http::async_read(self->http_, self->http_buffer_, self->response_,
                                         [self, which](beast::error_code ec2, std::size_t) {
                                           if (ec2) return self->poll_failed();
                                           self->answered(which);
                                         });
                      });
  }

  void answered(std::size_t which) {
    const int status = response_.result_int();
    if (status == 200 || status == 404) {
      ++totals_.polls;
    } else {
      ++totals_.bad_answers;
      note(totals_, "client " + std::to_string(id_) + ": GET " + kPollTargets[which] +
                        " answered " + std::to_string(status) + ": " + response_.body());
    }
    if (!response_.keep_alive()) close_http();
    if (which + 1 < std::size(kPollTargets)) return poll(which + 1);
    next_poll();
  }

  void poll_failed() {
    if (!polling_) return;  // ended: the failure is ours
    ++totals_.poll_errors;
    close_http();
    next_poll();
  }

  void next_poll() {
    if (!polling_) return;
    poll_timer_.expires_after(kPollPeriod);
    poll_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->poll(0);
    });
  }

  void close_http() {
    http_.close();
    http_open_ = false;
    http_buffer_.clear();
  }

  const int id_;
  tcp::endpoint ep_;
  std::string host_;
  websocket::stream<tcp::socket> ws_;
  beast::flat_buffer buffer_;
  beast::tcp_stream http_;
  beast::flat_buffer http_buffer_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> response_;
  net::steady_timer poll_timer_;
  bool stopping_ = false, polling_ = true, http_open_ = false;
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
    all.push_back(std::make_shared<Client>(ioc, i, totals));
    all.back()->start(ep, host);
  }
  auto stop = [&] {
    for (auto& c : all) c->stop();
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
  std::printf(
      "{\"clients\": %d, \"connected\": %d, \"dropped\": %d, \"frames\": %lld, \"bytes\": %lld, "
      "\"polls\": %lld, \"poll_errors\": %lld, \"bad_answers\": %lld}\n",
      clients, totals.connected, totals.dropped, totals.frames, totals.bytes, totals.polls,
      totals.poll_errors, totals.bad_answers);
  if (totals.notes > kMaxNotes)
    std::fprintf(stderr, "(%d more such lines left out)\n", totals.notes - kMaxNotes);
  if (totals.connected < clients)
    std::fprintf(stderr, "only %d of %d clients connected\n", totals.connected, clients);
  return totals.connected == clients && totals.dropped == 0 && totals.bad_answers == 0 ? 0 : 1;
}
