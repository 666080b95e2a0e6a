#include "control/certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "control/openssl_ptr.h"
#include "core/common/check.h"

namespace mddp::control {
namespace {

using ossl::bio_of;
using ossl::BioPtr;
using ossl::BnPtr;
using ossl::KeyPtr;
using ossl::X509Ptr;

// An OpenSSL call that must succeed (it only fails on memory or a bug).
void ok(int result, const char* what) {
  if (result <= 0) {
    char buf[256];
    ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
    ERR_clear_error();
    throw Error(str("OpenSSL: ", what, " failed: ", buf));
  }
}

KeyPtr new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) ok(0, "generating an EC P-256 key");
  return key;
}

bool is_ip(const std::string& host) {
  in6_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) ok(0, "making a certificate extension");
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  ok(added, "adding a certificate extension");
}

// "DNS:a,IP:10.0.0.1,...": the subject-alternative names of `names`.
std::string alt_names(const std::vector<std::string>& names) {
  std::string san;
  for (const auto& n : names) {
    if (!san.empty()) san += ',';
    san += is_ip(n) ? "IP:" : "DNS:";
    san += n;
  }
  return san;
}

// A certificate for `names` (the subject is the first) with `key`, signed by
// (issuer, issuer_key); self-signed when issuer is null. `ca`: a CA
// certificate, else one for the host known by those names.
X509Ptr make_cert(const std::vector<std::string>& names, EVP_PKEY* key, X509* issuer,
                  EVP_PKEY* issuer_key, int days, bool ca) {
  const std::string& subject_cn = names.front();
  X509Ptr cert(X509_new());
  ok(cert != nullptr, "X509_new");
  ok(X509_set_version(cert.get(), 2), "X509_set_version");  // v3
  BnPtr serial(BN_new());
  ok(BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY), "BN_rand");
  ok(BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr,
     "setting the serial number");
  // A minute back: a host whose clock is slightly behind still accepts it.
  ok(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60) != nullptr, "notBefore");
  ok(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) != nullptr, "notAfter");
  X509_NAME* name = X509_get_subject_name(cert.get());
  ok(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                reinterpret_cast<const unsigned char*>("microddp lab"), -1, -1, 0),
     "subject O");
  ok(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                reinterpret_cast<const unsigned char*>(subject_cn.c_str()), -1, -1,
                                0),
     "subject CN");
  ok(X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name),
     "issuer name");
  ok(X509_set_pubkey(cert.get(), key), "X509_set_pubkey");
  X509* signer = issuer ? issuer : cert.get();
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (ca) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
    add_extension(cert.get(), signer, NID_subject_alt_name, alt_names(names));
  }
  ok(X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()), "signing a certificate");
  return cert;
}

// Writes `text` to `path` with mode 0600 (also when it existed with another).
void write_private(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!written) throw Error(str("cannot write ", path.string(), ": ", std::strerror(err)));
}

std::string pem_of_cert(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ok(PEM_write_bio_X509(bio.get(), cert), "PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string pem_of_key(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  ok(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr),
     "PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The CA of an earlier call, or nulls when `dir` has none.
std::pair<X509Ptr, KeyPtr> existing_ca(const std::filesystem::path& cert_path,
                                       const std::filesystem::path& key_path) {
  if (!std::filesystem::exists(cert_path) || !std::filesystem::exists(key_path)) return {};
  const std::string cert_pem = read_all(cert_path), key_pem = read_all(key_path);
  BioPtr cb = bio_of(cert_pem), kb = bio_of(key_pem);
  X509Ptr cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  KeyPtr key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!cert || !key || X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    throw InputError(str(cert_path.string(), " and ", key_path.string(),
                         " are not a CA certificate and its key: remove them to make a new CA"));
  }
  return {std::move(cert), std::move(key)};
}

void check_host(const std::string& host) {
  const bool fine = !host.empty() && host.size() <= 253 && host != "ca" &&
                    host.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789.-:_") == std::string::npos &&
                    host.front() != '.' && host.front() != '-';
  if (!fine)
    throw InputError(str("--hosts: '", host,
                         "' is not a host name or IP address (letters, digits, '.', '-', ':', '_'; "
                         "not 'ca')"));
}

// "name+alt+...": the names one certificate holds, each checked.
std::vector<std::string> names_of(const std::string& spec) {
  std::vector<std::string> names;
  std::size_t start = 0;
  for (std::size_t plus; (plus = spec.find('+', start)) != std::string::npos; start = plus + 1)
    names.push_back(spec.substr(start, plus - start));
  names.push_back(spec.substr(start));
  for (const auto& n : names) check_host(n);
  return names;
}

}  // namespace

std::vector<std::filesystem::path> make_lab_certs(const std::filesystem::path& dir,
                                                  const LabCertsOptions& o) {
  if (o.hosts.empty()) throw InputError("--hosts: give at least one host name or IP address");
  if (o.days < 1 || o.days > 3650) throw InputError(str("--days must be 1..3650, got ", o.days));
  std::vector<std::vector<std::string>> names;
  for (const auto& h : o.hosts) names.push_back(names_of(h));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(str("cannot create ", dir.string(), ": ", ec.message()));

  std::vector<std::filesystem::path> written;
  const auto ca_cert_path = dir / "ca.pem", ca_key_path = dir / "ca.key";
  auto [ca_cert, ca_key] = existing_ca(ca_cert_path, ca_key_path);
  if (!ca_cert) {
    ca_key = new_key();
    ca_cert = make_cert({"microddp lab CA"}, ca_key.get(), nullptr, nullptr, o.days, true);
    write_private(ca_key_path, pem_of_key(ca_key.get()));
    write_private(ca_cert_path, pem_of_cert(ca_cert.get()));
    written.push_back(ca_cert_path);
    written.push_back(ca_key_path);
  }
  for (const auto& host_names : names) {
    const std::string& host = host_names.front();
    const KeyPtr key = new_key();
    const X509Ptr cert =
        make_cert(host_names, key.get(), ca_cert.get(), ca_key.get(), o.days, /*ca=*/false);
    const auto cert_path = dir / (host + ".pem"), key_path = dir / (host + ".key");
    write_private(key_path, pem_of_key(key.get()));
    write_private(cert_path, pem_of_cert(cert.get()));
    written.push_back(cert_path);
    written.push_back(key_path);
  }
  return written;
}

}  // namespace mddp::control
