// Rendezvous: the forming of one attempt of the job (coordinator/attempt.h).
// Collects world_size workers, then gives each a rank and a session.
// Workers that asked for a rank (RANK / SLURM_PROCID) get it; the others
// fill the free ranks in the order they joined.
//
// Elastic (min_nproc < world_size): once `elastic_wait` has passed
// since the window opened, the rendezvous also completes with fewer
// workers, as soon as at least min_nproc are there; the ranks are then
// 0..k-1, in the order of the ranks asked for (then of joining).
//
// Who may join at all (the proof of the token, the protocol version, the
// job id) is Admission's to say (admission.h), before a join gets here. A
// join is refused at once, each with its own message: a job that is
// already full, a requested rank outside 0..N-1, a rank another worker
// already asked for.
//
// The rendezvous window opens when the Rendezvous is made (the coordinator
// starts, or the attempt before ended) and lasts `timeout`; when it closes
// before enough joined, every pending join fails with "k of N joined" and
// timed_out() becomes true. A join whose own deadline passes first (or that
// is cancelled) leaves and frees its place. Waits follow
// Note [Waits complete exactly once] (outcome.h). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/join_request.h"
#include "coordinator/outcome.h"

namespace mddp::coordinator {

// A worker of the formed job.
struct Member {
  int rank = -1;
  std::string host, data_addr;
  std::string device;  // as requested at join ("" = the job's), then as the rank reported it
  int64_t pid = 0;
  std::string session;  // the credential of every later call
  int threads = 0;      // as reported (Resources); 0 until then
  int cpus = 0;
  std::string
      peer;  // the control-plane connection it joined on (gRPC's peer(): "ipv4:a.b.c.d:port")
};

struct JoinResult {
  Outcome outcome;
  Member self;                // when ok
  int world_size = 0;         // when ok: the ranks formed (Rendezvous::members() lists them)
  int attempt = 0;            // when ok: the attempt it joined (set by Job)
  std::string attempt_nonce;  // ... and its nonce (Attempt::nonce)
  // A newcomer to a running job that is not ready: no session; it builds
  // its model and joins again (Note [Healing] in job.cc).
  bool prepare = false;
};

class Rendezvous {
 public:
  struct Options {
    std::string job_id = "local";
    int world_size = 1;  // the most workers, and the size unless elastic
    int min_nproc = 0;   // 0 (or world_size): no fewer; else the elastic minimum
    std::chrono::milliseconds elastic_wait{10'000};  // before completing with fewer
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    int attempt = 0;  // named in messages of attempts after the first
  };
  using JoinCallback = std::function<void(JoinResult)>;
  // Runs once, when all N joined (at `now` of the last join), before any
  // joiner's callback.
  using CompleteHook = std::function<void(const std::vector<Member>&, TimePoint now)>;

  // The window opens at `opened`.
  Rendezvous(Options options, TimePoint opened, CompleteHook on_complete = {});

  // `id`: the ticket's id (0: a new one), so a caller that moves a join
  // between attempts cancels it by one id.
  Ticket join(JoinRequest request, TimePoint deadline, TimePoint now, JoinCallback done,
              uint64_t id = 0);
  void cancel(uint64_t id);
  // Fails the joins past their deadline; returns the failure message when the
  // whole rendezvous window closed (then timed_out()).
  std::optional<std::string> expire(TimePoint now);
  // Fails every pending join with kAborted and refuses later ones.
  void abort(const std::string& why);

  bool complete() const;
  bool timed_out() const;
  // Workers waiting in the rendezvous (the formed size once complete).
  int joined() const;
  int world_size() const { return options_.world_size; }  // the most
  int formed_size() const;  // the ranks it formed with; 0 until complete
  // The member holding `session`, if any.
  std::optional<Member> member(const std::string& session) const;
  std::vector<Member> members() const;  // rank order; empty until complete
  // Records what rank `rank` reports it runs on (an empty or overlong device
  // name, or a non-positive count, leaves that field as it was). True when the member
  // changed; false for an unknown rank or before the rendezvous completed.
  bool update_resources(int rank, const Resources& resources);

 private:
  struct Pending {
    JoinRequest request;
    TimePoint deadline;
    JoinCallback done;
  };
  // Why `r` must be refused now, or nullopt. Called under mu_.
  std::optional<Outcome> refusal(const JoinRequest& r) const;
  // Forms the attempt with every pending join (under mu_): the members, and
  // the joins to answer once the lock is released.
  std::vector<Pending> complete_locked();
  // Runs the complete hook, then answers the joins of `ready` (not under mu_).
  void finish(std::vector<Pending>& ready, const std::vector<Member>& members, TimePoint now);
  bool elastic_ready_locked(TimePoint now) const;
  std::string name() const;             // "job 'x'" or "attempt 2 of job 'x'"
  std::string pending_summary() const;  // "2 of 4 workers joined (host a pid 1, host b pid 2)"

  const Options options_;
  const CompleteHook on_complete_;
  mutable std::mutex mu_;
  std::map<uint64_t, Pending> pending_;  // ticket id -> join, in join order
  const TimePoint opened_, window_end_;
  std::vector<Member> members_;                           // rank order, once complete
  std::unordered_map<std::string, int> rank_of_session_;  // session -> rank, once complete
  bool timed_out_ = false;
  std::optional<std::string> aborted_;
};

// A random 128-bit session id, hex.
std::string new_session_id();

}  // namespace mddp::coordinator
