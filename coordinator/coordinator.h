// The coordinator server: a Job served over gRPC on host:port, with a ticker
// thread driving its deadlines and health checks.
//
//   Coordinator c({.host = "127.0.0.1", .port = 0, .job = {...}});
//   std::printf("workers: --coordinator %s\n", c.address().c_str());
//   JobStatus s = c.wait();  // until the job is over
//
// gRPC is hidden behind this header (no gRPC include), so commands and tests
// that only run a coordinator compile quickly.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "control/tls.h"
#include "coordinator/job.h"

namespace mddp::coordinator {

struct CoordinatorOptions {
  std::string host = "127.0.0.1";  // interface to listen on: 127.0.0.1, 0.0.0.0, an address
  int port = 29500;                // 0: any free port (see port())
  // TLS (load_tls(..., kServer)); nullopt: plaintext, and a warning once
  // when `host` is not loopback (the token and config then travel in the clear).
  std::optional<TlsConfig> tls{};
  JobOptions job;
  std::chrono::milliseconds tick{20};  // how often deadlines and health are checked
};

class Coordinator {
 public:
  // Binds and starts serving; throws mddp::Error when it cannot (port in use,
  // bad address) or InputError for bad options.
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();  // shutdown()
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  int port() const;             // the bound port (the chosen one when asked for 0)
  bool tls() const;             // whether workers must speak TLS to it
  std::string address() const;  // "host:port" for workers to dial
  Job& job();

  // Blocks until the job is over (Job::finished()) and returns its status.
  JobStatus wait();
  // The same, at most `timeout`; false when the job is not over yet.
  bool wait_for(std::chrono::milliseconds timeout);
  // Fails the job if it is not over ("coordinator shut down: <why>"), answers
  // every pending call, stops serving. Idempotent.
  void shutdown(const std::string& why = "coordinator shut down");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mddp::coordinator
