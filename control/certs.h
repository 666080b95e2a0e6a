// Certificates for a lab (`microddp certs DIR --hosts a,b,...`, and the
// throw-away set `microddp run --tls` makes for its local job): one CA and,
// for each host, a certificate naming it (an IP address becomes an IP
// subject-alternative name, anything else a DNS name) that is good both for
// serving (the coordinator, the dashboard) and as a client (a worker under
// --tls-client-auth). A host given as "name+alt+..." gets one certificate,
// DIR/name.pem, naming all of them (the compose lab's coordinator: its
// service name for the workers, 127.0.0.1 and localhost for a browser on
// the Docker host). Keys are ECDSA P-256; certificates SHA-256, signed
// through OpenSSL's libcrypto. Every file is written with mode 0600.
//
//   DIR/ca.pem  DIR/ca.key          the CA (reused when both exist: adding a
//                                   host later keeps the CA the others trust)
//   DIR/<host>.pem  DIR/<host>.key  one pair per host
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mddp::control {

struct LabCertsOptions {
  std::vector<std::string> hosts;  // names or IP addresses ("name+alt+..."), at least one
  int days = 365;                  // validity of new certificates
};

// Writes (or completes) the lab's files in `dir` (created when missing).
// Returns the paths written, CA first. Throws InputError for a bad host name
// (only letters, digits, '.', '-', ':' and '_'; '+' between one host's
// names), days out of 1..3650, or an unusable existing CA pair; mddp::Error when a file cannot be
// written.
std::vector<std::filesystem::path> make_lab_certs(const std::filesystem::path& dir,
                                                  const LabCertsOptions& options);

}  // namespace mddp::control
