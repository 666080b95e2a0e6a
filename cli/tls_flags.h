// The TLS flags of the commands that form a job (control/tls.h): the
// coordinator serves with --tls-cert/--tls-key (and, for mutual TLS,
// --tls-ca and --tls-client-auth); a worker verifies it with --tls-ca and,
// under mutual TLS, presents --tls-cert/--tls-key of its own. `microddp
// certs` makes the files; `microddp run --tls` makes a throw-away set.
#pragma once

#include <CLI/CLI.hpp>

#include "control/tls.h"

namespace mddp::cli {

// --tls-cert, --tls-key, --tls-ca (and --tls-client-auth for the server) in group "TLS".
void add_tls_flags(CLI::App& cmd, control::TlsFlags& flags, control::TlsRole role);

}  // namespace mddp::cli
