// CoordinatorClient: the worker's side of the control plane
// (proto/microddp.proto), one blocking method per call. Every call carries a
// gRPC deadline and waits for the channel to become ready within it, so a
// coordinator that starts a little later, or pauses briefly, only delays a
// call; one that stays away makes it fail with a message naming the address.
//
// It is also the job's comm::Store (Set/Get through the coordinator), so
// comm::connect_transport() publishes and reads the data-plane peer table
// through it. Thread-safe: the training, heartbeat and metrics threads share
// one client (and one HTTP/2 connection).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/fingerprint.h"
#include "control/job_status.h"
#include "control/join_request.h"
#include "control/progress.h"
#include "control/tls.h"
#include "control/verdict.h"
#include "core/comm/store.h"
#include "core/comm/types.h"
#include "core/common/check.h"
#include "core/perf/step_metrics.h"
#include "worker/coordinator_error.h"

namespace mddp::worker {

struct ClientOptions {
  std::string address;  // HOST:PORT
  std::string job_id = "local";
  std::string token;            // never sent: join proves it (control/proof.h)
  Millis call_timeout{30'000};  // deadline of calls that do not wait on others (Set, Leave, ...)
  // TLS to the coordinator (load_tls(..., kClient)): its certificate is
  // verified against ca_pem and must name the host of `address`; nullopt: plaintext.
  std::optional<control::TlsConfig> tls{};
};

struct JoinOptions {
  std::string host, data_addr, device;
  int requested_rank = -1;                  // < 0: any
  Millis timeout{std::chrono::minutes(6)};  // bounds the whole rendezvous wait
  bool ready = false;  // it holds its trainer already (a survivor; a newcomer that prepared)
};

struct JoinInfo {
  std::string session, job_id, job_config_json;
  int rank = -1, world_size = 0;
  Millis heartbeat_interval{1000}, heartbeat_timeout{10000};
  int attempt = 0;       // the job's attempt this session belongs to
  std::string data_key;  // the attempt's data-plane key (control::data_plane_key)
  // A newcomer to a running job (--on-failure heal): no session; build the
  // model from job_config_json for world_size ranks, then join again, ready.
  bool prepare = false;
};

// One heartbeat's answer.
struct HeartbeatInfo {
  // The job's state and attempt now, with the verdict when FAILED, or
  // RESTARTING (why this rank's attempt ended).
  control::JobStatus status;
  // One round trip: this host's steady clock around the call and the
  // coordinator's wall clock when it received it.
  struct ClockSample {
    int64_t send_ns = 0, reply_ns = 0;  // steady
    int64_t coordinator_unix_ns = 0;
  } clock;
};

// One metrics record as the worker streams it.
struct StepRecord {
  perf::StepMetrics metrics;
  int64_t time_unix_ns = 0;
};

// One StreamMetrics call: batches written as they come, the coordinator's
// count of accepted records at finish(). Not thread-safe except cancel().
class MetricsStream {
 public:
  virtual ~MetricsStream() = default;
  // Writes records[from..] in batches; false when the stream broke (finish() says why).
  virtual bool write(const std::vector<StepRecord>& records, std::size_t from) = 0;
  // Closes the stream; the number of records the coordinator accepted on it.
  // Throws CoordinatorError when the stream broke.
  virtual int64_t finish() = 0;
  // Ends the call at once (from any thread): a blocked write() or finish() returns.
  virtual void cancel() = 0;
};

// One Watch call (proto: Watch): the job's state as the coordinator pushes
// it. Not thread-safe except cancel().
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // Blocks until the next event; false when the stream ended (finish() says how).
  virtual bool next(control::JobStatus& status) = 0;
  // After next() returned false: returns when the coordinator closed the
  // stream itself (the job is over), throws CoordinatorError otherwise.
  virtual void finish() = 0;
  // Ends the call at once (from any thread): a blocked next() returns false.
  virtual void cancel() = 0;
};

class CoordinatorClient : public comm::Store {
 public:
  explicit CoordinatorClient(ClientOptions options);
  ~CoordinatorClient() override;
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  const std::string& address() const { return options_.address; }
  const std::string& session() const { return session_; }

  // Blocks until the coordinator accepts connections or `timeout`
  // (CoordinatorError: unreachable, naming the address).
  void wait_connected(Millis timeout);
  // Hello, then Join with a proof of the token over the server's nonce
  // (the token itself is never sent); blocks until the rendezvous
  // completes; remembers the session and its attempt. Throws
  // CoordinatorError (wrong token, job full, "k of N joined", unreachable).
  JoinInfo join(const JoinOptions& args);
  // Throws CoordinatorError (FAILED_PRECONDITION with the difference).
  void validate(const control::Fingerprint& fp, Millis timeout);
  // Returns the generation; throws CoordinatorError naming missing ranks.
  int64_t barrier(const std::string& name, Millis timeout);
  // One heartbeat, bounded by `deadline`; throws CoordinatorError.
  // `resources`: what this rank runs on, once known (nullptr: not yet).
  HeartbeatInfo heartbeat(const control::Progress& progress, Millis deadline,
                          const control::Resources* resources = nullptr);
  // Opens a StreamMetrics call that must finish within `deadline`.
  std::unique_ptr<MetricsStream> open_metrics_stream(Millis deadline);
  // Opens a Watch call; it has no deadline (cancel() ends it).
  std::unique_ptr<WatchStream> open_watch();
  // Tells the coordinator this rank's data-plane connection to `peer`
  // failed; the job's state then (its verdict when FAILED or RESTARTING).
  // Throws CoordinatorError.
  control::JobStatus report_peer_fault(int peer, comm::PeerFault fault, const std::string& detail,
                                       Millis timeout);
  // The job's state after this rank left. Throws CoordinatorError.
  control::JobStatus leave(bool ok, const std::string& message, Millis timeout);

  // comm::Store. set() throws CoordinatorError; get() throws
  // comm::TimeoutError naming the key when it is not set within `timeout`.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  struct Impl;
  ClientOptions options_;
  std::string session_;
  int attempt_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mddp::worker
