#include "cli/tls_flags.h"

namespace mddp::cli {

void add_tls_flags(CLI::App& cmd, control::TlsFlags& f, control::TlsRole role) {
  const char* g = "TLS";
  if (role == control::TlsRole::kServer) {
    cmd.add_option("--tls-cert", f.cert,
                   "PEM certificate to serve the control plane (and the dashboard, over HTTPS) "
                   "with; it must name the host workers dial (microddp certs)")
        ->group(g);
    cmd.add_option("--tls-key", f.key, "PEM private key of --tls-cert (mode 0600)")->group(g);
    cmd.add_option("--tls-ca", f.ca,
                   "PEM CA that signed the workers' certificates (--tls-client-auth)")
        ->group(g);
    cmd.add_flag("--tls-client-auth", f.client_auth,
                 "mutual TLS: refuse a worker without a certificate signed by --tls-ca")
        ->group(g);
  } else {
    cmd.add_option("--tls-ca", f.ca,
                   "speak TLS to the coordinator and verify its certificate against this PEM CA")
        ->group(g);
    cmd.add_option(
           "--tls-cert", f.cert,
           "PEM certificate this worker presents (when the coordinator has --tls-client-auth)")
        ->group(g);
    cmd.add_option("--tls-key", f.key, "PEM private key of --tls-cert (mode 0600)")->group(g);
  }
}

}  // namespace mddp::cli
