// Accepts connections and starts an HttpSession for each, once
// Connections::make_room() made room for it (an idle connection may be
// closed for it; when none can go, the new one is closed at once). io
// thread only (the constructor may run elsewhere before the io thread starts).
#pragma once

#include <memory>

#include "dashboard/server/beast.h"

namespace mddp::dashboard {

struct ServerContext;

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Binds and listens; throws mddp::Error naming the endpoint when it cannot.
  Listener(net::io_context& ioc, const tcp::endpoint& endpoint, std::shared_ptr<ServerContext> ctx);
  void start();
  void stop();
  unsigned short port() const { return port_; }

 private:
  void do_accept();
  void on_accept(beast::error_code ec, tcp::socket socket);

  tcp::acceptor acceptor_;
  std::shared_ptr<ServerContext> ctx_;
  unsigned short port_ = 0;
};

}  // namespace mddp::dashboard
