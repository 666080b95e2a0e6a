#include "control/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "control/openssl_ptr.h"
#include "core/common/check.h"

namespace mddp::control {
namespace {

using ossl::bio_of;
using ossl::BioPtr;
using ossl::KeyPtr;
using ossl::X509Ptr;

// OpenSSL's reason for the last failure, and the queue emptied.
std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no PEM block found";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::string read_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str("cannot read ", flag, " ", path, " (does the file exist?)"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The certificates of a PEM file (at least one), each in date.
std::vector<X509Ptr> parse_certs(const std::string& flag, const std::string& path,
                                 const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio = bio_of(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the end of the file reads as an error
  if (certs.empty())
    throw InputError(str(flag, " ", path,
                         " holds no PEM certificate (expected a '-----BEGIN "
                         "CERTIFICATE-----' block; make one with `microddp certs`)"));
  for (const auto& c : certs) {
    if (X509_cmp_current_time(X509_get0_notAfter(c.get())) <= 0)
      throw InputError(str(flag, " ", path,
                           ": a certificate has expired (make new ones with "
                           "`microddp certs`)"));
    if (X509_cmp_current_time(X509_get0_notBefore(c.get())) >= 0)
      throw InputError(str(flag, " ", path,
                           ": a certificate is not valid yet (is this host's "
                           "clock right?)"));
  }
  return certs;
}

KeyPtr parse_key(const std::string& path, const std::string& pem) {
  BioPtr bio = bio_of(pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    throw InputError(
        str("--tls-key ", path, " holds no unencrypted PEM private key (", openssl_reason(), ")"));
  return key;
}

void warn_if_readable_by_others(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    spdlog::warn("--tls-key {} is readable by other users (mode {:o}): chmod 600 it", path,
                 st.st_mode & 0777);
}

}  // namespace

std::optional<TlsConfig> load_tls(const TlsFlags& f, TlsRole role) {
  if (!f.any()) return std::nullopt;
  const bool server = role == TlsRole::kServer;
  if (f.cert.empty() != f.key.empty())
    throw InputError("give --tls-cert and --tls-key together (a certificate and its private key)");
  if (server && f.cert.empty())
    throw InputError(
        "TLS needs this side's certificate: give --tls-cert FILE and --tls-key FILE (make them "
        "with `microddp certs DIR --hosts HOST,...`)");
  if (server && f.client_auth && f.ca.empty())
    throw InputError(
        "--tls-client-auth needs --tls-ca FILE: the CA that signed the workers' certificates");
  if (!server && f.ca.empty())
    throw InputError(
        "TLS to the coordinator needs --tls-ca FILE: the CA that signed its certificate (the "
        "ca.pem of `microddp certs`)");
  TlsConfig c;
  c.client_auth = f.client_auth;
  if (!f.cert.empty()) {
    c.cert_pem = read_file("--tls-cert", f.cert);
    c.key_pem = read_file("--tls-key", f.key);
    const auto certs = parse_certs("--tls-cert", f.cert, c.cert_pem);
    const KeyPtr key = parse_key(f.key, c.key_pem);
    if (X509_check_private_key(certs.front().get(), key.get()) != 1) {
      ERR_clear_error();
      throw InputError(str("--tls-key ", f.key, " is not the key of --tls-cert ", f.cert,
                           " (pass the .key file made with that certificate)"));
    }
    warn_if_readable_by_others(f.key);
  }
  if (!f.ca.empty()) {
    c.ca_pem = read_file("--tls-ca", f.ca);
    parse_certs("--tls-ca", f.ca, c.ca_pem);
  }
  return c;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace mddp::control
