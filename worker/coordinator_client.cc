#include "worker/coordinator_client.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "control/duration.h"
#include "control/limits.h"
#include "control/proof.h"
#include "control/protocol_version.h"
#include "control/wire.h"
#include "core/comm/types.h"
#include "core/common/hmac.h"
#include "core/common/timer.h"
#include "mddp/config.h"
#include "proto/microddp.grpc.pb.h"
#include "worker/coordinator_streams.h"
#include "worker/grpc_call.h"

namespace mddp::worker {
namespace {

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(
    const std::optional<control::TlsConfig>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls->ca_pem;
  o.pem_private_key = tls->key_pem;
  o.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(o);
}

// The job's state from a reply that carries it with its verdict (Leave, ReportPeerFault).
control::JobStatus job_state(v1::JobState state, const v1::Verdict& verdict) {
  return {control::from_proto(state), control::from_proto(verdict), 0};
}

}  // namespace

struct CoordinatorClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
};

CoordinatorClient::CoordinatorClient(ClientOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  if (options_.address.empty() || options_.address.find(':') == std::string::npos)
    throw InputError(str("--coordinator must be HOST:PORT, got '", options_.address, "'"));
  grpc::ChannelArguments args;
  // Reconnect quickly after a coordinator restart or a dropped connection
  // (gRPC's default backoff grows to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(static_cast<int>(control::kMaxMessageBytes));
  impl_->channel =
      grpc::CreateCustomChannel(options_.address, channel_credentials(options_.tls), args);
  impl_->stub = v1::Coordinator::NewStub(impl_->channel);
}

CoordinatorClient::~CoordinatorClient() = default;

JoinInfo CoordinatorClient::join(const JoinOptions& a) {
  v1::HelloRequest hello;
  hello.set_job_id(options_.job_id);
  hello.set_protocol_version(control::kProtocolVersion);
  const v1::HelloReply challenge = call(*impl_->stub, &v1::Coordinator::Stub::Hello, hello,
                                        options_.call_timeout, "hello", options_.address);
  const int64_t pid = ::getpid();
  v1::JoinRequest req;
  req.set_job_id(options_.job_id);
  req.set_protocol_version(control::kProtocolVersion);
  req.set_host(a.host);
  req.set_data_addr(a.data_addr);
  req.set_device(a.device);
  if (a.requested_rank >= 0) req.set_requested_rank(a.requested_rank);
  req.set_pid(pid);
  req.set_version(MDDP_VERSION);
  req.set_ready(a.ready);
  req.set_client_nonce(random_bytes(kNonceBytes));
  req.set_server_nonce(challenge.server_nonce());
  req.set_proof(control::join_proof(options_.token, options_.job_id, req.server_nonce(),
                                    req.client_nonce(), a.host, pid));
  const v1::JoinReply reply =
      call(*impl_->stub, &v1::Coordinator::Stub::Join, req, a.timeout, "join", options_.address);
  JoinInfo info;
  info.session = reply.session();
  info.job_id = reply.job_id();
  info.job_config_json = reply.job_config_json();
  info.rank = reply.rank();
  info.world_size = reply.world_size();
  info.heartbeat_interval = Millis(reply.heartbeat_interval_ms());
  info.heartbeat_timeout = Millis(reply.heartbeat_timeout_ms());
  info.attempt = reply.attempt();
  info.data_key = control::data_plane_key(options_.token, info.job_id, reply.attempt_nonce());
  info.prepare = reply.prepare();
  session_ = info.session;
  attempt_ = info.attempt;
  return info;
}

void CoordinatorClient::validate(const control::Fingerprint& fp, Millis timeout) {
  v1::ValidateRequest req;
  req.set_session(session_);
  control::to_proto(fp, req.mutable_fingerprint());
  req.set_timeout_ms(timeout.count());
  call(*impl_->stub, &v1::Coordinator::Stub::Validate, req, timeout + options_.call_timeout,
       "validate", options_.address);
}

int64_t CoordinatorClient::barrier(const std::string& name, Millis timeout) {
  v1::BarrierRequest req;
  req.set_session(session_);
  req.set_name(name);
  req.set_timeout_ms(timeout.count());
  return call(*impl_->stub, &v1::Coordinator::Stub::Barrier, req, timeout + options_.call_timeout,
              "barrier '" + name + "'", options_.address)
      .generation();
}

HeartbeatInfo CoordinatorClient::heartbeat(const control::Progress& progress, Millis deadline,
                                           const control::Resources* resources) {
  v1::HeartbeatRequest req;
  req.set_session(session_);
  control::to_proto(progress, req.mutable_progress());
  if (resources) control::to_proto(*resources, req.mutable_resources());
  req.set_client_send_unix_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  const int64_t send_ns = now_ns();
  const v1::HeartbeatReply reply = call(*impl_->stub, &v1::Coordinator::Stub::Heartbeat, req,
                                        deadline, "heartbeat", options_.address);
  const int64_t reply_ns = now_ns();
  return {
      {control::from_proto(reply.state()), control::from_proto(reply.verdict()), reply.attempt()},
      {send_ns, reply_ns, reply.coordinator_receive_unix_ns()}};
}

std::unique_ptr<WatchStream> CoordinatorClient::open_watch() {
  return grpc_watch_stream(*impl_->stub, session_, options_.address);
}

std::unique_ptr<MetricsStream> CoordinatorClient::open_metrics_stream(Millis deadline) {
  return grpc_metrics_stream(*impl_->stub, session_, attempt_, options_.address, deadline);
}

control::JobStatus CoordinatorClient::report_peer_fault(int peer, comm::PeerFault fault,
                                                        const std::string& detail, Millis timeout) {
  v1::PeerFaultReport req;
  req.set_session(session_);
  req.set_peer(peer);
  req.set_fault(control::to_proto(fault));
  req.set_detail(detail);
  const v1::PeerFaultReply reply = call(*impl_->stub, &v1::Coordinator::Stub::ReportPeerFault, req,
                                        timeout, "report", options_.address);
  return job_state(reply.state(), reply.verdict());
}

void CoordinatorClient::wait_connected(Millis timeout) {
  const auto deadline = after(timeout);
  for (;;) {
    const grpc_connectivity_state state = impl_->channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      // Why the last connection failed: a fail-fast call's status says. (If
      // the channel is already trying again, the call waits for that try:
      // on a loaded machine a TLS handshake outlasted a 1 s deadline every
      // time, and "Deadline Exceeded" hid the handshake's reason.)
      v1::HeartbeatRequest req;
      v1::HeartbeatReply reply;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::min(deadline, after(Millis(10'000))));
      const grpc::Status s = impl_->stub->Heartbeat(&ctx, req, &reply);
      const auto code = s.error_code();
      if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED)
        return;  // the coordinator answered (refusing the empty session): connected
      spdlog::debug("connecting to the coordinator at {}: {}", options_.address, s.error_message());
      if (std::string why = tls_mismatch(s.error_message(), options_.tls.has_value()); !why.empty())
        throw CoordinatorError(
            str("cannot connect to the coordinator at ", options_.address, ": ", why),
            static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    }
    // TRANSIENT_FAILURE is sticky: the channel reports it until a connection
    // is READY, so waiting for it to change could outlast the whole timeout
    // while each new attempt fails for a reason that the next probe would
    // name (a first attempt cut short before the server's SETTINGS frame,
    // then "Socket closed"). So a failing channel is probed again each second.
    const auto wake = state == GRPC_CHANNEL_TRANSIENT_FAILURE
                          ? std::min(deadline, after(Millis(1000)))
                          : deadline;
    if (!impl_->channel->WaitForStateChange(state, wake) && wake == deadline)
      throw CoordinatorError(
          str("cannot reach the coordinator at ", options_.address, " within ",
              control::format_duration(timeout),
              ". Is it running, and does --coordinator name an address this host can reach?"),
          static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  }
}

control::JobStatus CoordinatorClient::leave(bool ok, const std::string& message, Millis timeout) {
  v1::LeaveRequest req;
  req.set_session(session_);
  req.set_ok(ok);
  req.set_message(message);
  const v1::LeaveReply reply =
      call(*impl_->stub, &v1::Coordinator::Stub::Leave, req, timeout, "leave", options_.address);
  return job_state(reply.state(), reply.verdict());
}

void CoordinatorClient::set(const std::string& key, const std::string& value) {
  v1::SetRequest req;
  req.set_session(session_);
  req.set_key(key);
  req.set_value(value);
  call(*impl_->stub, &v1::Coordinator::Stub::Set, req, options_.call_timeout, "set '" + key + "'",
       options_.address);
}

std::string CoordinatorClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  v1::GetRequest req;
  req.set_session(session_);
  req.set_key(key);
  req.set_timeout_ms(std::max<int64_t>(1, timeout.count()));
  v1::GetReply reply;
  // The coordinator answers DEADLINE_EXCEEDED itself at `timeout`; the margin
  // lets its message (naming the key) arrive before our own deadline.
  const Millis deadline = timeout + Millis(5000);
  const grpc::Status s = try_call(*impl_->stub, &v1::Coordinator::Stub::Get, req, reply, deadline);
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    throw comm::TimeoutError(s.error_message() == "Deadline Exceeded"
                                 ? str("get '", key, "': no answer from the coordinator at ",
                                       options_.address, " within ",
                                       control::format_duration(deadline))
                                 : s.error_message());
  if (!s.ok()) throw call_error("get '" + key + "'", options_.address, s, deadline);
  return reply.value();
}

}  // namespace mddp::worker
