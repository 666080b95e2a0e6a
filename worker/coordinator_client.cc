#include "worker/coordinator_client.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

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

std::chrono::system_clock::time_point after(Millis d) {
  return std::chrono::system_clock::now() + d;
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(
    const std::optional<control::TlsConfig>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = tls->ca_pem;
  o.pem_private_key = tls->key_pem;
  o.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(o);
}

// Every call: a deadline, and wait for the channel to be ready within it
// (instead of failing at once while the coordinator is starting or paused).
void prepare(grpc::ClientContext& ctx, Millis deadline) {
  ctx.set_deadline(after(deadline));
  ctx.set_wait_for_ready(true);
}

// Why a connection that failed during set-up (gRPC's `message`) cannot
// succeed however long we wait — TLS on one side only, or a certificate
// refused — or "" when it may (e.g. the coordinator is not listening yet).
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

}  // namespace

bool CoordinatorError::unreachable() const {
  return code_ == static_cast<int>(grpc::StatusCode::UNAVAILABLE) ||
         code_ == static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED);
}

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

namespace {

// The one line a failed call becomes.
[[noreturn]] void fail(const char* call, const std::string& address, const grpc::Status& s,
                       Millis deadline) {
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
  throw CoordinatorError(msg, static_cast<int>(s.error_code()));
}

// The job's state from a reply that carries it with its verdict (Leave, ReportPeerFault).
HeartbeatInfo job_state(v1::JobState state, const v1::Verdict& verdict) {
  const control::Verdict v = control::from_proto(verdict);
  return {control::from_proto(state), v.message, v.failed_rank(), v, 0, {}};
}

}  // namespace

JoinInfo CoordinatorClient::join(const JoinOptions& a) {
  v1::HelloRequest hello;
  hello.set_job_id(options_.job_id);
  hello.set_protocol_version(control::kProtocolVersion);
  v1::HelloReply challenge;
  {
    grpc::ClientContext ctx;
    prepare(ctx, options_.call_timeout);
    const grpc::Status s = impl_->stub->Hello(&ctx, hello, &challenge);
    if (!s.ok()) fail("hello", options_.address, s, options_.call_timeout);
  }
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
  req.set_client_nonce(random_bytes(kNonceBytes));
  req.set_server_nonce(challenge.server_nonce());
  req.set_proof(control::join_proof(options_.token, options_.job_id, req.server_nonce(),
                                    req.client_nonce(), a.host, pid));
  v1::JoinReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, a.timeout);
  const grpc::Status s = impl_->stub->Join(&ctx, req, &reply);
  if (!s.ok()) fail("join", options_.address, s, a.timeout);
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
  session_ = info.session;
  attempt_ = info.attempt;
  return info;
}

void CoordinatorClient::validate(const control::Fingerprint& fp, Millis timeout) {
  v1::ValidateRequest req;
  req.set_session(session_);
  control::to_proto(fp, req.mutable_fingerprint());
  req.set_timeout_ms(timeout.count());
  v1::ValidateReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, timeout + options_.call_timeout);
  const grpc::Status s = impl_->stub->Validate(&ctx, req, &reply);
  if (!s.ok()) fail("validate", options_.address, s, timeout + options_.call_timeout);
}

int64_t CoordinatorClient::barrier(const std::string& name, Millis timeout) {
  v1::BarrierRequest req;
  req.set_session(session_);
  req.set_name(name);
  req.set_timeout_ms(timeout.count());
  v1::BarrierReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, timeout + options_.call_timeout);
  const grpc::Status s = impl_->stub->Barrier(&ctx, req, &reply);
  if (!s.ok())
    fail(("barrier '" + name + "'").c_str(), options_.address, s, timeout + options_.call_timeout);
  return reply.generation();
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
  v1::HeartbeatReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, deadline);
  const int64_t send_ns = now_ns();
  const grpc::Status s = impl_->stub->Heartbeat(&ctx, req, &reply);
  const int64_t reply_ns = now_ns();
  if (!s.ok()) fail("heartbeat", options_.address, s, deadline);
  return {control::from_proto(reply.state()),
          reply.failure(),
          reply.failed_rank(),
          control::from_proto(reply.verdict()),
          reply.attempt(),
          {send_ns, reply_ns, reply.coordinator_receive_unix_ns()}};
}

namespace {

class GrpcMetricsStream final : public MetricsStream {
 public:
  GrpcMetricsStream(v1::Coordinator::Stub& stub, const std::string& session, int attempt,
                    const std::string& address, Millis deadline)
      : stub_(stub), session_(session), attempt_(attempt), address_(address), deadline_(deadline) {
    prepare(ctx_, deadline);
  }
  bool write(const std::vector<StepRecord>& records, std::size_t from) override {
    constexpr int kPerBatch = 256;  // records per message (each well under 1 KiB)
    static_assert(static_cast<std::size_t>(kPerBatch) <= control::kMaxMetricsBatch);
    // Started here, not in the constructor: starting blocks until the channel
    // is ready, and the owner must be able to cancel() that wait.
    if (!writer_) writer_ = stub_.StreamMetrics(&ctx_, &ack_);
    v1::MetricsBatch batch;
    for (std::size_t i = from; i < records.size(); ++i) {
      control::to_proto(records[i].metrics, records[i].time_unix_ns, batch.add_steps());
      if (batch.steps_size() == kPerBatch || i + 1 == records.size()) {
        batch.set_session(session_);
        batch.set_attempt(attempt_);
        if (!writer_->Write(batch)) return false;
        batch.Clear();
      }
    }
    return true;
  }
  int64_t finish() override {
    if (!writer_) return 0;
    writer_->WritesDone();
    const grpc::Status s = writer_->Finish();
    if (!s.ok()) fail("metrics stream", address_, s, deadline_);
    return ack_.count();
  }
  void cancel() override { ctx_.TryCancel(); }

 private:
  v1::Coordinator::Stub& stub_;
  const std::string session_;
  const int attempt_;
  const std::string address_;
  const Millis deadline_;
  grpc::ClientContext ctx_;
  v1::MetricsAck ack_;
  std::unique_ptr<grpc::ClientWriter<v1::MetricsBatch>> writer_;
};

class GrpcWatchStream final : public WatchStream {
 public:
  GrpcWatchStream(v1::Coordinator::Stub& stub, const std::string& session,
                  const std::string& address)
      : stub_(stub), address_(address) {
    req_.set_session(session);
    ctx_.set_wait_for_ready(true);  // no deadline: it lives as long as the job
  }
  bool next(control::JobStatus& status) override {
    // Started here, not in the constructor: starting blocks until the
    // channel is ready, and the owner must be able to cancel() that wait.
    if (!reader_) reader_ = stub_.Watch(&ctx_, req_);
    v1::JobEvent event;
    if (!reader_->Read(&event)) return false;
    status.state = control::from_proto(event.state());
    status.verdict = control::from_proto(event.verdict());
    return true;
  }
  void finish() override {
    const grpc::Status s = reader_ ? reader_->Finish() : grpc::Status::CANCELLED;
    if (!s.ok()) fail("watch", address_, s, Millis(0));
  }
  void cancel() override { ctx_.TryCancel(); }

 private:
  v1::Coordinator::Stub& stub_;
  const std::string address_;
  v1::WatchRequest req_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader_;
};

}  // namespace

std::unique_ptr<WatchStream> CoordinatorClient::open_watch() {
  return std::make_unique<GrpcWatchStream>(*impl_->stub, session_, options_.address);
}

HeartbeatInfo CoordinatorClient::report_peer_fault(int peer, comm::PeerFault fault,
                                                   const std::string& detail, Millis timeout) {
  v1::PeerFaultReport req;
  req.set_session(session_);
  req.set_peer(peer);
  req.set_fault(control::to_proto(fault));
  req.set_detail(detail);
  v1::PeerFaultReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, timeout);
  const grpc::Status s = impl_->stub->ReportPeerFault(&ctx, req, &reply);
  if (!s.ok()) fail("report", options_.address, s, timeout);
  return job_state(reply.state(), reply.verdict());
}

std::unique_ptr<MetricsStream> CoordinatorClient::open_metrics_stream(Millis deadline) {
  return std::make_unique<GrpcMetricsStream>(*impl_->stub, session_, attempt_, options_.address,
                                             deadline);
}

void CoordinatorClient::wait_connected(Millis timeout) {
  const auto deadline = after(timeout);
  for (;;) {
    const grpc_connectivity_state state = impl_->channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) return;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      // Why the last connection failed: a fail-fast call's status says.
      v1::HeartbeatRequest req;
      v1::HeartbeatReply reply;
      grpc::ClientContext ctx;
      ctx.set_deadline(after(Millis(1000)));
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
    if (!impl_->channel->WaitForStateChange(state, deadline))
      throw CoordinatorError(
          str("cannot reach the coordinator at ", options_.address, " within ",
              control::format_duration(timeout),
              ". Is it running, and does --coordinator name an address this host can reach?"),
          static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  }
}

HeartbeatInfo CoordinatorClient::leave(bool ok, const std::string& message, Millis timeout) {
  v1::LeaveRequest req;
  req.set_session(session_);
  req.set_ok(ok);
  req.set_message(message);
  v1::LeaveReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, timeout);
  const grpc::Status s = impl_->stub->Leave(&ctx, req, &reply);
  if (!s.ok()) fail("leave", options_.address, s, timeout);
  return job_state(reply.state(), reply.verdict());
}

void CoordinatorClient::set(const std::string& key, const std::string& value) {
  v1::SetRequest req;
  req.set_session(session_);
  req.set_key(key);
  req.set_value(value);
  v1::SetReply reply;
  grpc::ClientContext ctx;
  prepare(ctx, options_.call_timeout);
  const grpc::Status s = impl_->stub->Set(&ctx, req, &reply);
  if (!s.ok()) fail(("set '" + key + "'").c_str(), options_.address, s, options_.call_timeout);
}

std::string CoordinatorClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  v1::GetRequest req;
  req.set_session(session_);
  req.set_key(key);
  req.set_timeout_ms(std::max<int64_t>(1, timeout.count()));
  v1::GetReply reply;
  grpc::ClientContext ctx;
  // The coordinator answers DEADLINE_EXCEEDED itself at `timeout`; the margin
  // lets its message (naming the key) arrive before our own deadline.
  const Millis deadline = timeout + Millis(5000);
  prepare(ctx, deadline);
  const grpc::Status s = impl_->stub->Get(&ctx, req, &reply);
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    throw comm::TimeoutError(s.error_message() == "Deadline Exceeded"
                                 ? str("get '", key, "': no answer from the coordinator at ",
                                       options_.address, " within ",
                                       control::format_duration(deadline))
                                 : s.error_message());
  if (!s.ok()) fail(("get '" + key + "'").c_str(), options_.address, s, deadline);
  return reply.value();
}

}  // namespace mddp::worker
