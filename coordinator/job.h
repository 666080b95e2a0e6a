// Job: one training job as the coordinator sees it, in attempts
// (See Note [Attempts] in job.cc): who may join (Admission), the attempts (each with
// its rendezvous, fingerprint check, key/value store, barriers and health:
// attempt.h), the job's state, the metrics log and the restart policy, in
// domain terms with no gRPC. The service (service.h) only translates
// messages to these calls.
//
// Calls after join name the caller by its session. An unknown session is
// refused (kUnauthenticated); a session of an attempt that ended is told
// so: the status calls (heartbeat, leave, watch, peer reports) answer
// RESTARTING with why its attempt ended, the calls that carry data
// (validate, set, get, barrier, metrics after the next attempt formed) are
// refused with kFailedPrecondition ("session of attempt 1; the job is in
// attempt 2"), so a late message of an old attempt is never mixed in.
//
// The first failure of an attempt (a rank that dies, goes silent, leaves
// with a failure or builds a different model; a link between two live
// ranks that breaks; a rendezvous that times out; the coordinator itself
// stalled) gives a Verdict. When a restart can cure it and the budget
// (max_restarts) is not spent, the attempt ends and the next one forms
// (Note [What is restarted]); otherwise the job fails: the verdict is logged
// once, pushed to every Watch stream, and every pending wait is aborted
// with "the job failed: ...", so no call hangs on a dead job. Waits follow
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

#include "control/verdict.h"
#include "coordinator/admission.h"
#include "coordinator/attempt.h"
#include "coordinator/job_state.h"
#include "coordinator/membership_log.h"
#include "coordinator/metrics_log.h"
#include "coordinator/outcome.h"
#include "coordinator/restarts.h"
#include "coordinator/watchers.h"
#include "core/comm/types.h"

namespace mddp::coordinator {

struct JobOptions {
  std::string job_id = "local";
  std::string token;  // "" = none
  int world_size = 1;
  // Elastic (--min-nproc): an attempt may form with fewer ranks, at least
  // this many, once elastic_wait passed since it opened (0: always world_size).
  int min_nproc = 0;
  std::chrono::milliseconds elastic_wait{10'000};
  int max_restarts = 0;  // attempts after the first, for the whole job
  // --on-failure shrink: a rank that died or went silent is dropped and the
  // others re-form the next attempt at once, in their processes
  // (Note [Shrinking] in job.cc); other failures restart as max_restarts says.
  bool shrink = false;
  // --on-failure heal (with shrink): a worker that joins a job running on
  // fewer ranks than world_size is taken in at once; the survivors re-form
  // with it and it takes the state from them (Note [Healing] in job.cc).
  bool heal = false;
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
    int attempt = 0;  // the caller's attempt
  };

  // The first attempt's rendezvous window opens at `now`.
  explicit Job(JobOptions options, TimePoint now = Clock::now());
  const JobOptions& options() const { return options_; }

  // Hello: a server nonce for one join (admission.h).
  Admission::Challenge hello(const std::string& job_id, uint32_t protocol_version,
                             const std::string& peer, TimePoint now);
  // Admits the worker (the proof of the token), then waits in the current
  // attempt's rendezvous. While an attempt runs and restarts remain, a
  // join waits for the next attempt instead (a rank that died and came
  // back before the coordinator ended the attempt). The result carries the
  // attempt and its nonce.
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
  // Appends the records of one batch (their rank and attempt set from the
  // session; `attempt` is what the batch says: it must be the session's).
  // A session of the attempt just ended may still deliver while the next
  // one forms. The reply's rank is the sender's.
  Reply metrics(const std::string& session, int attempt, std::vector<MetricsRecord> records);
  Reply leave(const std::string& session, bool ok, const std::string& message, TimePoint now);
  void cancel(Ticket ticket);

  // A Watch stream (proto: Watch). `on_change(status, finished)` is called
  // when the job becomes terminal or the watcher's attempt ends
  // (RESTARTING), and again (finished = true) once the stream may close;
  // never under Job's locks, possibly from any thread. The reply carries
  // the status at the time of the call and the id for unwatch().
  using WatchCallback = Watchers::Callback;
  struct WatchReply {
    Outcome outcome;
    JobStatus status;
    int rank = -1;
    uint64_t id = 0;
    bool finished = false;  // nothing more will come: close the stream after the status
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
  // Whether the control-plane connection with gRPC peer `peer` is closed
  // (coordinator/connection_gate.h knows the server's connections).
  using ConnectionClosed = std::function<bool(const std::string& peer)>;
  // A rank of the running attempt that holds no Watch stream yet and whose
  // join connection closed died before it could open one (killed just after
  // its join was accepted): it counts as disconnected, as when a stream ends
  // (Note [Who is at fault] in health.cc), not silent until the heartbeat
  // timeout. Ticker thread.
  void check_join_connections(const ConnectionClosed& closed, TimePoint now);
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

  std::optional<Member> member(const std::string& session) const;
  // Every rank of the current attempt, in rank order, with what it
  // reported it runs on; empty while it forms.
  std::vector<Member> members() const;
  int world_size() const;  // of the current attempt once formed, else the most
  // The current attempt's health (ranks, heartbeat ages); empty while it forms.
  std::vector<RankHealth> ranks() const;
  std::vector<Restart> restarts() const;
  // The job config handed to the workers of `attempt` (JoinReply): the one
  // given, with "resume_latest" set in the attempts after a restart, so
  // that rank 0 resumes from the newest checkpoint in the run directory.
  std::string config_for(int attempt) const;
  // The config a newcomer prepares from (JoinResult::prepare): it will take
  // the state from the live ranks.
  std::string newcomer_config() const;
  int joined() const;              // workers waiting in the current attempt's rendezvous
  std::size_t store_size() const;  // keys in the current attempt's store; 0 while it forms
  const MetricsLog& metrics_log() const { return metrics_log_; }
  const MembershipLog& membership_log() const { return membership_log_; }
  // Why <run dir>/job.json is not up to date (its last write failed), or "".
  std::string job_file_error() const;

 private:
  // The caller's attempt and member, or the refusal to give it. `ended_ok`:
  // a session of an ended attempt is found (status calls), else refused.
  struct Caller {
    std::shared_ptr<Attempt> attempt;
    std::shared_ptr<Attempt::Formed> formed;
    Member member;
    bool current = false;
  };
  std::optional<Caller> lookup(const std::string& session, Outcome& refusal, bool ended_ok) const;
  // For the calls that report status (heartbeat, leave, metrics, peer
  // reports): the caller, of any attempt, with `reply` holding its rank,
  // attempt and the status it is told; else nullopt, `reply` saying why.
  std::optional<Caller> status_caller(const std::string& session, Reply& reply) const;
  std::shared_ptr<Attempt> current() const;
  // The job's config with boolean `flag` set (as given when it is no JSON object).
  std::string config_with(const char* flag) const;
  // How the next attempt forms: every rank starts again (kRestart), or the
  // survivors re-form in their processes without the rank at fault
  // (kShrink) or with the workers that joined (kGrow).
  enum class Reform { kRestart, kShrink, kGrow };
  // The next attempt's rendezvous: the job's size (elastic down to
  // --min-nproc), or for a re-form `size` ranks, formed as soon as they are
  // all there (or, after a heartbeat timeout, with those there).
  std::shared_ptr<Attempt> open_attempt(int number, TimePoint now, Reform how = Reform::kRestart,
                                        int size = 0);
  // The status a session of `attempt` is told.
  JobStatus status_for(const Attempt& attempt) const;
  // A verdict of `attempt`: it restarts, or the job fails (ignored when
  // `attempt` is not the current one, or ended already).
  void fail(Verdict verdict, TimePoint now, const std::shared_ptr<Attempt>& attempt);
  void fail_job(Verdict verdict);
  void restart(const std::shared_ptr<Attempt>& ended, Verdict verdict, TimePoint now,
               Reform how = Reform::kRestart);
  void say_restart(const std::string& why, Reform how, int from, int size, int next,
                   int used) const;
  // --on-failure heal: the running attempt, on fewer ranks than the job's,
  // takes in the workers parked meanwhile (tick).
  void grow_if_joined(TimePoint now);
  // A join refused by `attempt` (full, ended) may wait for the next one.
  bool may_wait_for_next(const std::shared_ptr<Attempt>& attempt) const;
  void join_attempt(JoinRequest request, TimePoint deadline, TimePoint now,
                    Rendezvous::JoinCallback done, uint64_t id);
  void note_job_file(const std::string& error);
  void note_metrics_error(const std::string& error);  // logged once
  void on_formed(Attempt& attempt, const std::vector<Member>& members, TimePoint now);
  // How `attempt` formed, for the membership log: "start", "restart", "shrink" or "grow".
  std::string how_formed(int attempt) const;
  // When the attempt before `attempt` ended (its restart line); now for the first.
  int64_t ended_unix_ns(int attempt) const;
  // The membership log's line of the attempt whose first training step is in `records`.
  void note_membership(int attempt, const std::vector<MetricsRecord>& records);
  // Rewrites job.json and warns of newly oversubscribed hosts when a member
  // changed since the last call (ticker thread).
  void on_members_changed();
  // Writes <run dir>/job.json (job_file.h) as the job is now; a failure is
  // logged and kept (job_file_error). The attempt that forms and the ticker
  // both write it: one at a time (job_file_mu_), each with the state as it
  // is when its turn comes, so the last write is the newest state.
  void save_job_file();
  void set_finished();

  const JobOptions options_;
  JobState state_;
  Admission admission_;
  MetricsLog metrics_log_;
  MembershipLog membership_log_;
  int first_attempt_ = 0;  // set once, in the constructor

  mutable std::mutex mu_;
  std::mutex job_file_mu_;  // taken before mu_, never while holding it
  mutable std::condition_variable cv_;
  std::vector<std::shared_ptr<Attempt>> attempts_;  // every attempt; the current is last
  Restarts restarts_{0, 0};                         // set in the constructor
  struct Parked {                                   // a join waiting for the next attempt
    JoinRequest request;
    TimePoint deadline;
    Rendezvous::JoinCallback done;
  };
  std::map<uint64_t, Parked> parked_;  // by ticket id
  // While a re-formed attempt forms: the survivors' (host, pid) with their
  // ranks in it, and the newcomers' of a grow, the only workers it takes
  // (Note [Shrinking]); empty otherwise.
  std::map<std::pair<std::string, int64_t>, int> survivors_;
  std::set<std::pair<std::string, int64_t>> newcomers_;
  // The attempts re-formed in the running processes (shrink, grow): their
  // ranks take the state from live peers, not from a checkpoint.
  std::set<int> reformed_;
  bool finished_ = false;
  std::optional<TimePoint> failed_at_;
  TimePoint next_sync_{};
  bool metrics_write_failed_ = false;
  std::string job_file_error_;
  int64_t started_unix_ns_ = 0;  // when the first attempt formed (job.json's started_unix_ns)
  bool members_changed_ = false;
  std::set<std::string> warned_hosts_;  // oversubscribed hosts already warned of
  Watchers watchers_;                   // the open Watch streams
};

}  // namespace mddp::coordinator
