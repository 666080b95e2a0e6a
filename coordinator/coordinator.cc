#include "coordinator/coordinator.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "control/limits.h"
#include "coordinator/connection_gate.h"
#include "coordinator/service.h"
#include "core/common/check.h"

namespace mddp::coordinator {
namespace {

// TLS from the checked PEM text (tls.h), or plaintext.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const std::optional<TlsConfig>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(
      tls->client_auth ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  o.pem_root_certs = tls->ca_pem;
  o.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(o);
}

}  // namespace

struct Coordinator::Impl {
  CoordinatorOptions options;
  Job job;
  Service service{job};
  std::shared_ptr<ConnectionGate> gate;  // before the server, which holds it too
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::thread ticker;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::once_flag shutdown_once;

  explicit Impl(CoordinatorOptions o) : options(std::move(o)), job(options.job) {}

  // A tick that comes much later than asked means this process did not run
  // meanwhile (SIGSTOP, a debugger, a starved CPU): Job::paused() hears of
  // it before the tick judges anyone's silence.
  // Measured from the previous tick's start: a stop that lands inside a
  // tick (after it read the clock) still shows as a gap at the next one.
  void tick_loop() {
    std::unique_lock lock(mu);
    TimePoint last = Clock::now();  // when the previous tick started
    while (!stopping) {
      lock.unlock();
      const TimePoint now = Clock::now();
      if (now - last >= job.options().heartbeat_interval + options.tick)
        job.paused(now - last, now);
      last = now;
      job.check_join_connections([this](const std::string& p) { return gate->closed(p); }, now);
      job.tick(now);
      lock.lock();
      cv.wait_for(lock, options.tick, [&] { return stopping; });
    }
  }
};

Coordinator::Coordinator(CoordinatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  const auto& o = impl_->options;
  if (o.port < 0 || o.port > 65535) throw InputError(str("--port must be 0..65535, got ", o.port));
  const std::string listen = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) +
                             ":" + std::to_string(o.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, server_credentials(o.tls), &impl_->port);
  builder.RegisterService(&impl_->service);
  // Don't share a port with another process (SO_REUSEPORT would let two coordinators bind one).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxMessageBytes));
  impl_->gate = guard_connections(builder, raise_connection_limits());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    throw Error(
        str("cannot listen on ", listen,
            ": the port is in use or the address is not one of this host's "
            "(pick another --port, or 0 for any free port; --host 0.0.0.0 listens everywhere)"));
  impl_->gate->bound_backlog();
  impl_->ticker = std::thread([this] { impl_->tick_loop(); });
  spdlog::info("coordinator for job '{}' listening on {} ({} workers expected{})", o.job.job_id,
               address(), o.job.world_size,
               !o.tls               ? ""
               : o.tls->client_auth ? ", mutual TLS"
                                    : ", TLS");
  if (!o.tls && !is_loopback(o.host))
    spdlog::warn(
        "the control plane on {} has no TLS: the job token, config and metrics travel in the "
        "clear, "
        "so anyone on the path can read the token and join the job. Give --tls-cert and --tls-key "
        "(`microddp certs`), or listen on 127.0.0.1 (docs/security.md)",
        address());
}

Coordinator::~Coordinator() {
  shutdown();
}

int Coordinator::port() const {
  return impl_->port;
}

bool Coordinator::tls() const {
  return impl_->options.tls.has_value();
}

std::string Coordinator::address() const {
  const std::string& h = impl_->options.host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

Job& Coordinator::job() {
  return impl_->job;
}

JobStatus Coordinator::wait() {
  while (!impl_->job.wait_finished(Clock::now() + std::chrono::hours(1))) {
  }
  return impl_->job.status();
}

bool Coordinator::wait_for(std::chrono::milliseconds timeout) {
  return impl_->job.wait_finished(Clock::now() + timeout);
}

void Coordinator::shutdown(const std::string& why) {
  std::call_once(impl_->shutdown_once, [&] {
    impl_->job.shutdown(why);  // no-op on the state when the job is over; answers every wait
    {
      std::lock_guard lock(impl_->mu);
      impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->ticker.joinable()) impl_->ticker.join();
    // Calls still open (metrics streams) get a moment, then are cancelled.
    // (A worker process that keeps an idle channel open without reading it
    // also holds Shutdown until this deadline: its connection never sees the
    // GOAWAY.)
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server->Wait();
    spdlog::info("coordinator stopped");
  });
}

}  // namespace mddp::coordinator
