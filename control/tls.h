// TLS for the control plane (gRPC) and the dashboard (HTTPS): the files the
// flags name, read and checked once, before anything listens or dials, so a
// wrong file is one clear line instead of a failed handshake later.
//
//   coordinator, dashboard:  --tls-cert, --tls-key (its certificate and key),
//                            --tls-ca and --tls-client-auth (mutual TLS: every
//                            worker must present a certificate signed by the CA)
//   worker:                  --tls-ca (verifies the coordinator's certificate),
//                            --tls-cert, --tls-key (its own, for mutual TLS)
//
// The crypto is OpenSSL's (libcrypto, which gRPC links as well); nothing
// here is hand-written. No gRPC or Asio in this header: the dashboard and
// the commands use it too. See docs/security.md.
#pragma once

#include <optional>
#include <string>

namespace mddp::control {

// The flags as given (paths; "" = not given).
struct TlsFlags {
  std::string cert, key, ca;
  bool client_auth = false;
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty() || client_auth; }
};

// What the flags name, read: PEM text, checked to parse, to be in date and
// (cert and key) to belong together.
struct TlsConfig {
  std::string cert_pem, key_pem;  // "" on a worker without its own certificate
  std::string ca_pem;             // "" on a coordinator without --tls-ca
  bool client_auth = false;       // coordinator: require and verify client certificates
};

enum class TlsRole { kServer, kClient };

// nullopt when no TLS flag is given. Throws InputError naming the flag and
// the file for: a file that cannot be read or is not PEM of the right kind, a
// certificate out of date, a key that does not match its certificate, a
// server without --tls-cert/--tls-key, --tls-client-auth without --tls-ca,
// a client without --tls-ca, one of --tls-cert/--tls-key without the other.
// Warns when a key file is readable by other users.
std::optional<TlsConfig> load_tls(const TlsFlags& flags, TlsRole role);

// Whether `host` (an interface to listen on) is this machine only.
bool is_loopback(const std::string& host);

}  // namespace mddp::control
