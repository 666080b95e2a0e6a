#include "dashboard/server/listener.h"

#include "core/common/check.h"
#include "dashboard/server/http_session.h"
#include "dashboard/server/server_context.h"

namespace mddp::dashboard {

Listener::Listener(net::io_context& ioc, const tcp::endpoint& endpoint,
                   std::shared_ptr<ServerContext> ctx)
    : acceptor_(ioc), ctx_(std::move(ctx)) {
  beast::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(str("the dashboard cannot listen on ", endpoint, ": ", ec.message(),
                    " (choose another --http-port, or 0 for any free one)"));
  port_ = acceptor_.local_endpoint().port();
}

void Listener::start() {
  do_accept();
}

void Listener::stop() {
  beast::error_code ignored;
  acceptor_.close(ignored);
}

void Listener::do_accept() {
  acceptor_.async_accept(beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
}

void Listener::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (!ec) {
    beast::error_code peer_ec;
    const std::string address = socket.remote_endpoint(peer_ec).address().to_string();
    if (peer_ec || !ctx_->connections.make_room(address))
      socket.close(ec);  // gone already, or no room: closed at once, nothing read
    else
      std::make_shared<HttpSession>(std::move(socket), ctx_, address)->start();
  }
  do_accept();  // a failed accept (e.g. out of descriptors) does not end the listener
}

}  // namespace mddp::dashboard
