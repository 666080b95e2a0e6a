#include "worker/coordinator_error.h"

#include <grpcpp/support/status.h>

#include "control/duration.h"

namespace mddp::worker {
namespace {

const char* code_name(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    default:
      return "UNKNOWN";
  }
}

}  // namespace

bool CoordinatorError::unreachable() const {
  return code_ == static_cast<int>(grpc::StatusCode::UNAVAILABLE) ||
         code_ == static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED);
}

CoordinatorError call_error(const std::string& call, const std::string& address,
                            const grpc::Status& s, Millis deadline) {
  std::string msg;
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE)
    msg = str(call, ": cannot reach the coordinator at ", address, " (", s.error_message(),
              "). Is it running, and does --coordinator name an address this host can reach?");
  else if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
           s.error_message() == "Deadline Exceeded")
    msg = str(call, ": no answer from the coordinator at ", address, " within ",
              control::format_duration(deadline), " (is it overloaded, stopped, or cut off?)");
  else if (s.error_code() == grpc::StatusCode::CANCELLED ||
           s.error_code() == grpc::StatusCode::UNKNOWN ||
           s.error_code() == grpc::StatusCode::INTERNAL ||
           s.error_code() == grpc::StatusCode::UNIMPLEMENTED)
    msg = str(call, " failed (", code_name(s.error_code()), "): ", s.error_message());
  else  // the coordinator's own refusals are worded for the user
    msg = str(call, ": ", s.error_message());
  return CoordinatorError(msg, static_cast<int>(s.error_code()));
}

std::string tls_mismatch(const std::string& message, bool tls) {
  const auto has = [&](const char* s) { return message.find(s) != std::string::npos; };
  if (has("wrong version number"))
    return "it does not speak TLS: drop --tls-ca (or start the coordinator with --tls-cert and "
           "--tls-key)";
  if (has("Ssl handshake failed")) {
    const std::size_t at = message.find("SSL routines::");
    const std::string reason = at == std::string::npos ? message : message.substr(at + 14);
    return str("the TLS handshake failed (", reason,
               "): is --tls-ca the CA that signed the coordinator's certificate, and does that "
               "certificate name the host in --coordinator? (microddp certs --hosts HOST)");
  }
  if (has("Socket closed") || has("Connection reset"))
    return tls ? "the coordinator refused the TLS connection: under --tls-client-auth it wants "
                 "--tls-cert and --tls-key signed by its --tls-ca"
               : "the coordinator closed the connection during set-up: it speaks TLS, so give "
                 "--tls-ca (and, under --tls-client-auth, --tls-cert and --tls-key)";
  return "";
}

}  // namespace mddp::worker
