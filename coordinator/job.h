// Job: one training job as the coordinator sees it — the state classes
// (Rendezvous, FingerprintCheck, KvStore, Barrier, Health, MetricsLog,
// JobState) tied together, in domain terms with no gRPC. The service
// (service.h) only translates messages to these calls.
//
// Calls after join name the caller by its session; an unknown session is
// refused (kUnauthenticated). The first failure (a rank that leaves with a
// failure, dies, goes silent, or builds a different model; a link between
// two live ranks that breaks; a rendezvous that times out; the coordinator
// itself stalled) fails the job with a Verdict, is logged once, is pushed to
// every Watch stream, and aborts every pending wait with "the job failed:
// ...", so no call hangs on a dead job. Waits follow
// Note [Waits complete exactly once] (outcome.h). tick(now) drives deadlines
// and health; call it every few tens of milliseconds, from one thread.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/barrier.h"
#include "coordinator/fingerprint.h"
#include "coordinator/health.h"
#include "coordinator/job_state.h"
#include "coordinator/kv_store.h"
#include "coordinator/metrics_log.h"
#include "coordinator/outcome.h"
#include "coordinator/rendezvous.h"
#include "coordinator/verdict.h"
#include "core/comm/types.h"

namespace mddp::coordinator {

// Control-plane protocol version (proto: PROTOCOL_VERSION_CURRENT).
constexpr uint32_t kProtocolVersion = 1;

struct JobOptions {
  std::string job_id = "local";
  std::string token;  // "" = none
  int world_size = 1;
  std::string config_json = "{}";  // handed to every worker at join
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  // After a failure, how long the job stays up so the live ranks hear of it
  // in a heartbeat and leave; 0 = 3 heartbeat intervals + 2 s.
  std::chrono::milliseconds linger{0};
  std::filesystem::path run_dir;  // metrics.jsonl goes here; "" = in memory only
};

class Job {
 public:
  struct Reply {  // of heartbeat and leave
    Outcome outcome;
    JobStatus status;
    int rank = -1;
  };

  // The rendezvous window opens at `now`.
  explicit Job(JobOptions options, TimePoint now = Clock::now());
  const JobOptions& options() const { return options_; }

  Ticket join(JoinRequest request, TimePoint deadline, TimePoint now,
              Rendezvous::JoinCallback done);
  Ticket validate(const std::string& session, Fingerprint fp, TimePoint deadline, TimePoint now,
                  FingerprintCheck::Callback done);
  Outcome set(const std::string& session, const std::string& key, std::string value);
  Ticket get(const std::string& session, const std::string& key, TimePoint deadline, TimePoint now,
             KvStore::GetCallback done);
  Ticket barrier(const std::string& session, const std::string& name, TimePoint deadline,
                 TimePoint now, Barrier::Callback done);
  // `resources`: what the rank reports it runs on (a worker sends them once
  // it has resolved the job's config); recorded in its member, and job.json
  // is rewritten at the next tick when that changed it.
  Reply heartbeat(const std::string& session, const Progress& progress, TimePoint now,
                  const std::optional<Resources>& resources = std::nullopt);
  // Appends the records of one batch (their rank set from the session); the
  // reply's rank is the sender's.
  Reply metrics(const std::string& session, std::vector<MetricsRecord> records);
  Reply leave(const std::string& session, bool ok, const std::string& message, TimePoint now);
  void cancel(Ticket ticket);

  // A Watch stream (proto: Watch). `on_change(status, finished)` is called
  // when the job becomes terminal, and again (finished = true) once it is
  // over and the server may close; never under Job's locks, possibly from
  // any thread. The reply carries the status at the time of the call and
  // the id for unwatch().
  using WatchCallback = std::function<void(const JobStatus& status, bool finished)>;
  struct WatchReply {
    Outcome outcome;
    JobStatus status;
    int rank = -1;
    uint64_t id = 0;
  };
  WatchReply watch(const std::string& session, TimePoint now, WatchCallback on_change);
  // The stream ended (the worker closed it, or its connection broke): when
  // it was the rank's last one and the rank has not left, the rank counts as
  // disconnected (Note [Who is at fault] in health.cc).
  void unwatch(uint64_t id, TimePoint now);
  // A rank's data-plane connection to `peer` failed (proto: ReportPeerFault).
  Reply report_peer_fault(const std::string& session, int peer, comm::PeerFault fault,
                          const std::string& detail, TimePoint now);

  void tick(TimePoint now);
  // The coordinator's process did not run for `gap` up to `now` (its ticker
  // saw the gap: SIGSTOP, a debugger, a starved CPU). Longer than the
  // workers wait for it (they give up after the heartbeat timeout, counted
  // from their last answer, up to an interval before the gap) the job fails
  // saying so, blaming no rank; shorter, what ranks did not do meanwhile
  // does not count against them.
  void paused(Clock::duration gap, TimePoint now);
  // Fails the job (if not over yet) and aborts every wait; e.g. on Ctrl-C.
  void shutdown(const std::string& why);

  JobStatus status() const { return state_.status(); }
  // True once the job is over (as seen by the tick after it): succeeded, or
  // failed and every rank left (or the linger time passed).
  bool finished() const;
  // Blocks until finished() or `deadline`; returns finished().
  bool wait_finished(TimePoint deadline) const;

  std::optional<Member> member(const std::string& session) const {
    return rendezvous_.member(session);
  }
  const Rendezvous& rendezvous() const { return rendezvous_; }
  // Every rank, in rank order, with what it reported it runs on; empty while forming.
  std::vector<Member> members() const { return rendezvous_.members(); }
  const Health& health() const { return health_; }
  const MetricsLog& metrics_log() const { return metrics_log_; }
  // Why <run dir>/job.json is not up to date (its last write failed), or "".
  std::string job_file_error() const;
  const KvStore& store() const { return store_; }

 private:
  // The member of `session`, or the refusal to give the caller.
  std::optional<Member> lookup(const std::string& session, Outcome& refusal) const;
  void fail(Verdict verdict);
  // Calls every watcher's callback with the current status (outside the locks).
  void notify_watchers(bool finished);
  void note_job_file(const std::string& error);
  void abort_waits(const std::string& why);
  void on_rendezvous(const std::vector<Member>& members, TimePoint now);
  // Rewrites job.json and warns of newly oversubscribed hosts when a member
  // changed since the last call (ticker thread).
  void on_members_changed();
  void set_finished();

  const JobOptions options_;
  JobState state_;
  Rendezvous rendezvous_;
  FingerprintCheck fingerprints_;
  KvStore store_;
  Barrier barrier_;
  Health health_;
  MetricsLog metrics_log_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool finished_ = false;
  std::optional<TimePoint> failed_at_;
  TimePoint next_sync_{};
  bool metrics_write_failed_ = false;
  std::string job_file_error_;
  int64_t started_unix_ns_ = 0;  // when the job formed (job.json's started_unix_ns)
  bool members_changed_ = false;
  std::set<std::string> warned_hosts_;  // oversubscribed hosts already warned of
  struct Watcher {
    int rank;
    WatchCallback on_change;
  };
  std::map<uint64_t, Watcher> watchers_;  // open Watch streams by id
  std::map<int, int> watching_;           // rank -> its open Watch streams
};

}  // namespace mddp::coordinator
