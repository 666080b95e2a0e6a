// `microddp certs DIR --hosts a,b,...`: a CA and one certificate per host
// for a lab's TLS (control/certs.h). Give the coordinator its host's
// pair (--tls-cert DIR/HOST.pem --tls-key DIR/HOST.key), every worker
// --tls-ca DIR/ca.pem (and, under --tls-client-auth, its own host's pair).
// Copy only a host's own key to that host; keep DIR/ca.key off the job's hosts.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "control/certs.h"

namespace mddp::cli {
namespace {

struct CertsFlags {
  std::string dir;
  control::LabCertsOptions o;
};

void run_certs(const CertsFlags& a) {
  const auto written = control::make_lab_certs(a.dir, a.o);
  for (const auto& p : written) std::printf("wrote %s\n", p.c_str());
  const std::string& h = a.o.hosts.front();
  std::printf(
      "coordinator on %s: --tls-cert %s/%s.pem --tls-key %s/%s.key [--tls-ca %s/ca.pem "
      "--tls-client-auth]\n"
      "every worker:     --tls-ca %s/ca.pem [--tls-cert %s/HOST.pem --tls-key %s/HOST.key]\n",
      h.c_str(), a.dir.c_str(), h.c_str(), a.dir.c_str(), h.c_str(), a.dir.c_str(), a.dir.c_str(),
      a.dir.c_str(), a.dir.c_str());
}

}  // namespace

void register_certs(CLI::App& app) {
  auto a = std::make_shared<CertsFlags>();
  auto* cmd = app.add_subcommand(
      "certs",
      "Make a CA and a TLS certificate per host for a job's control plane and dashboard "
      "(files mode 0600; an existing DIR/ca.pem + ca.key is reused)");
  cmd->add_option("dir", a->dir, "directory to write ca.pem, ca.key, HOST.pem, HOST.key into")
      ->required();
  cmd->add_option("--hosts", a->o.hosts,
                  "host names or IP addresses, one certificate each: the name workers dial the "
                  "coordinator by, and each worker's host for --tls-client-auth; NAME+ALT+...: "
                  "one certificate NAME.pem naming all of them (e.g. coordinator+127.0.0.1)")
      ->delimiter(',')
      ->required();
  cmd->add_option("--days", a->o.days, "validity of the new certificates")->capture_default_str();
  cmd->callback([a] { run_certs(*a); });
}

}  // namespace mddp::cli
