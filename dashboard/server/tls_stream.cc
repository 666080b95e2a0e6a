#include "dashboard/server/tls_stream.h"

#include "core/common/check.h"

namespace mddp::dashboard {

std::unique_ptr<ssl::context> make_tls_context(const control::TlsConfig& tls) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  beast::error_code ec;
  ctx->use_certificate_chain(net::buffer(tls.cert_pem), ec);
  if (!ec) ctx->use_private_key(net::buffer(tls.key_pem), ssl::context::pem, ec);
  if (ec)
    throw InputError(
        str("the dashboard cannot serve HTTPS with --tls-cert/--tls-key: ", ec.message()));
  return ctx;
}

}  // namespace mddp::dashboard
