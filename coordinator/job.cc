#include "coordinator/job.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "coordinator/limits.h"
#include "core/common/files.h"
#include "core/common/check.h"
#include "core/perf/host_load.h"

namespace mddp::coordinator {

Job::Job(JobOptions options, TimePoint now)
    : options_(std::move(options)),
      rendezvous_(Rendezvous::Options{options_.job_id, options_.token, options_.world_size,
                                      kProtocolVersion, options_.rendezvous_timeout},
                  now,
                  [this](const std::vector<Member>& members, TimePoint now) {
                    on_rendezvous(members, now);
                  }),
      fingerprints_(options_.world_size),
      barrier_(options_.world_size),
      health_(Health::Options{options_.heartbeat_interval, options_.heartbeat_timeout}),
      metrics_log_(options_.run_dir) {
  if (options_.world_size < 1)
    throw InputError(str("--world-size must be at least 1, got ", options_.world_size));
  if (options_.heartbeat_interval.count() <= 0 ||
      options_.heartbeat_timeout <= 2 * options_.heartbeat_interval)
    throw InputError(str("--heartbeat-timeout-ms (", options_.heartbeat_timeout.count(),
                         ") must exceed two heartbeat periods (--heartbeat-ms ",
                         options_.heartbeat_interval.count(), ")"));
}

namespace {

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json count_or_null(int n) {
  return n > 0 ? nlohmann::json(n) : nlohmann::json(nullptr);
}

// <run dir>/job.json: what `microddp analyze` needs besides the metrics (the
// world, the config, who ran where and on how many CPUs). Written once the
// job has formed, then again whenever a rank reports what it runs on;
// replaced atomically (rename), so a reader never sees half a file. Returns
// "" or why it could not be written.
std::string write_job_file(const JobOptions& o, const std::vector<Member>& members,
                           int64_t started_unix_ns) {
  if (o.run_dir.empty()) return "";
  nlohmann::json config = nlohmann::json::parse(o.config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) config = nlohmann::json::object();
  const std::string job_device = config.contains("device") && config["device"].is_string()
                                     ? config["device"].get<std::string>()
                                     : std::string();
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& m : members)
    ranks.push_back({{"rank", m.rank},
                     {"host", m.host},
                     {"device", m.device.empty() ? job_device : m.device},
                     {"pid", m.pid},
                     {"threads", count_or_null(m.threads)},
                     {"cpus", count_or_null(m.cpus)}});
  const nlohmann::json j{{"job_id", o.job_id},
                         {"world_size", o.world_size},
                         {"started_unix_ns", started_unix_ns},
                         {"config", config},
                         {"members", ranks}};
  const auto path = (o.run_dir / "job.json").string();
  const std::string error = write_atomically(path, j.dump(2) + "\n");
  return error.empty() ? error : str("cannot write ", path, ": ", error);
}

}  // namespace

void Job::on_rendezvous(const std::vector<Member>& members, TimePoint now) {
  std::vector<std::string> hosts;
  std::vector<int64_t> pids;
  std::string table;
  for (const auto& m : members) {
    hosts.push_back(m.host);
    pids.push_back(m.pid);
    table += str(table.empty() ? "" : ", ", m.rank, " = ", m.host, " (pid ", m.pid,
                 m.device.empty() ? std::string() : ", " + m.device, ")");
  }
  health_.start(hosts, now, pids);
  int64_t started;
  {
    std::lock_guard lock(mu_);
    started = started_unix_ns_ = unix_ns_now();
  }
  note_job_file(write_job_file(options_, members, started));
  state_.set_running();
  spdlog::info("rendezvous complete: all {} workers joined job '{}' (rank {})", members.size(),
               options_.job_id, table);
}

std::optional<Member> Job::lookup(const std::string& session, Outcome& refusal) const {
  auto m = rendezvous_.member(session);
  if (!m)
    refusal = Outcome::error(
        Code::kUnauthenticated,
        "unknown session: join first (or the coordinator was restarted and this worker "
        "belongs to its old job)");
  return m;
}

Ticket Job::join(JoinRequest request, TimePoint deadline, TimePoint now,
                 Rendezvous::JoinCallback done) {
  const std::string who = str("host ", request.host, " pid ", request.pid);
  spdlog::info("join from {}{}", who,
               request.requested_rank >= 0 ? str(" (asks for rank ", request.requested_rank, ")")
                                           : std::string());
  return rendezvous_.join(std::move(request), deadline, now,
                          [who, done = std::move(done)](JoinResult r) {
                            if (!r.outcome.ok())
                              spdlog::warn("join from {} refused ({}): {}", who,
                                           to_string(r.outcome.code), r.outcome.message);
                            done(std::move(r));
                          });
}

Ticket Job::validate(const std::string& session, Fingerprint fp, TimePoint deadline, TimePoint now,
                     FingerprintCheck::Callback done) {
  Outcome refusal;
  auto m = lookup(session, refusal);
  if (!m) {
    done(refusal);
    return {};
  }
  const int rank = m->rank;
  const std::string who = str("rank ", rank, " (host ", m->host, ")");
  return fingerprints_.submit(rank, who, std::move(fp), deadline, now,
                              [this, m = *m, done = std::move(done)](Outcome o) {
                                const int rank = m.rank;
                                if (o.ok()) {
                                  spdlog::info("rank {} validated its model", rank);
                                } else if (o.code == Code::kFailedPrecondition) {
                                  fail(Verdict{.cause = Cause::kModelMismatch,
                                               .rank = rank,
                                               .host = m.host,
                                               .pid = m.pid,
                                               .doing = "setup",
                                               .message = o.message});
                                } else if (o.code != Code::kAborted) {
                                  spdlog::warn("rank {} validation: {}", rank, o.message);
                                }
                                done(std::move(o));
                              });
}

Outcome Job::set(const std::string& session, const std::string& key, std::string value) {
  Outcome refusal;
  auto m = lookup(session, refusal);
  if (!m) return refusal;
  spdlog::debug("rank {} set '{}' ({} bytes)", m->rank, key, value.size());
  Outcome o = store_.set(key, std::move(value));
  if (!o.ok() && o.code != Code::kAborted)
    spdlog::warn("rank {} set '{}': {}", m->rank, key, o.message);
  return o;
}

Ticket Job::get(const std::string& session, const std::string& key, TimePoint deadline,
                TimePoint now, KvStore::GetCallback done) {
  Outcome refusal;
  auto m = lookup(session, refusal);
  if (!m) {
    done(refusal, {});
    return {};
  }
  const int rank = m->rank;
  return store_.get(key, deadline, now,
                    [rank, key, done = std::move(done)](Outcome o, std::string value) {
                      if (!o.ok() && o.code != Code::kAborted) {
                        o.message = str("rank ", rank, ": ", o.message);
                        spdlog::warn("get '{}': {}", key, o.message);
                      }
                      done(std::move(o), std::move(value));
                    });
}

Ticket Job::barrier(const std::string& session, const std::string& name, TimePoint deadline,
                    TimePoint now, Barrier::Callback done) {
  Outcome refusal;
  auto m = lookup(session, refusal);
  if (!m) {
    done(refusal, 0);
    return {};
  }
  const int rank = m->rank;
  return barrier_.arrive(name, rank, deadline, now,
                         [rank, name, done = std::move(done)](Outcome o, int64_t gen) {
                           if (o.ok() && rank == 0)
                             spdlog::log(gen == 0 ? spdlog::level::info : spdlog::level::debug,
                                         "barrier '{}' generation {} complete", name, gen);
                           if (!o.ok() && o.code != Code::kAborted)
                             spdlog::warn("rank {} barrier '{}': {}", rank, name, o.message);
                           done(std::move(o), gen);
                         });
}

Job::Reply Job::heartbeat(const std::string& session, const Progress& progress, TimePoint now,
                          const std::optional<Resources>& resources) {
  Reply reply;
  auto m = lookup(session, reply.outcome);
  if (m) {
    reply.rank = m->rank;
    health_.heartbeat(m->rank, progress, now);
    spdlog::trace("heartbeat rank {}: {} of step {}", m->rank, progress.phase, progress.step);
    if (resources && rendezvous_.update_resources(m->rank, *resources)) {
      spdlog::debug("rank {} (host {}) runs on {} with {} compute threads, {} CPUs", m->rank,
                    m->host, resources->device, resources->threads, resources->cpus);
      std::lock_guard lock(mu_);
      members_changed_ = true;
    }
  }
  reply.status = state_.status();
  return reply;
}

Job::Reply Job::metrics(const std::string& session, std::vector<MetricsRecord> records) {
  Reply reply;
  auto m = lookup(session, reply.outcome);
  if (!m) return reply;
  reply.rank = m->rank;
  if (records.size() > kMaxMetricsBatch) {
    reply.outcome = Outcome::error(Code::kInvalidArgument,
                                   str("a metrics batch of ", records.size(), " records (at most ",
                                       kMaxMetricsBatch, " in one message)"));
    return reply;
  }
  for (const auto& r : records)
    if (r.metrics.buckets.size() > kMaxBucketsPerRecord) {
      reply.outcome = Outcome::error(
          Code::kInvalidArgument, str("a metrics record of step ", r.metrics.step, " with ",
                                      r.metrics.buckets.size(), " bucket spans (at most ",
                                      kMaxBucketsPerRecord, ")"));
      return reply;
    }
  for (auto& r : records) r.metrics.rank = m->rank;
  const std::string error = metrics_log_.append(std::move(records));
  if (!error.empty()) {
    std::lock_guard lock(mu_);
    if (!metrics_write_failed_)
      spdlog::error("metrics log: {} (the records that do not fit are counted and named at the end; "
                    "writing goes on as space comes back)", error);
    metrics_write_failed_ = true;
  }
  reply.status = state_.status();
  return reply;
}

Job::Reply Job::leave(const std::string& session, bool ok, const std::string& message,
                      TimePoint now) {
  Reply reply;
  auto m = lookup(session, reply.outcome);
  if (!m) {
    reply.status = state_.status();
    return reply;
  }
  reply.rank = m->rank;
  if (ok)
    spdlog::info("rank {} (host {}) left: done", m->rank, m->host);
  else
    spdlog::error("rank {} (host {}) left with a failure: {}", m->rank, m->host, message);
  const Health::LeaveResult left = health_.leave(m->rank, ok, message, now);
  if (left.failure) fail(*left.failure);
  if (left.all_ok && state_.succeed())
    spdlog::info("job '{}' succeeded: all {} ranks finished", options_.job_id, options_.world_size);
  // finished() follows at the next tick, not here: this reply must get out
  // before the server starts shutting down.
  reply.status = state_.status();
  return reply;
}

void Job::cancel(Ticket ticket) {
  switch (ticket.kind) {
    case Ticket::Kind::kNone:
      break;
    case Ticket::Kind::kJoin:
      rendezvous_.cancel(ticket.id);
      break;
    case Ticket::Kind::kValidate:
      fingerprints_.cancel(ticket.id);
      break;
    case Ticket::Kind::kGet:
      store_.cancel(ticket.id);
      break;
    case Ticket::Kind::kBarrier:
      barrier_.cancel(ticket.id);
      break;
  }
}

void Job::fail(Verdict verdict) {
  const std::string message = verdict.message;
  if (!state_.fail(std::move(verdict))) return;
  spdlog::error("job '{}' failed: {}", options_.job_id, message);
  abort_waits("the job failed: " + message);
  notify_watchers(false);
}

void Job::notify_watchers(bool finished) {
  std::vector<WatchCallback> callbacks;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, w] : watchers_) callbacks.push_back(w.on_change);
  }
  const JobStatus status = state_.status();
  for (const auto& cb : callbacks) cb(status, finished);
}

Job::WatchReply Job::watch(const std::string& session, TimePoint now, WatchCallback on_change) {
  WatchReply reply;
  auto m = lookup(session, reply.outcome);
  if (!m) return reply;
  reply.rank = m->rank;
  reply.id = next_ticket_id();
  {
    std::lock_guard lock(mu_);
    watchers_.emplace(reply.id, Watcher{m->rank, std::move(on_change)});
    ++watching_[m->rank];
  }
  const Clock::duration away = health_.connected(m->rank, now);
  if (away > Clock::duration::zero())
    spdlog::warn("rank {} (host {}) is connected again after {} away", m->rank, m->host,
                 format_duration(away));
  spdlog::debug("rank {} watches the job", m->rank);
  reply.status = state_.status();
  return reply;
}

void Job::unwatch(uint64_t id, TimePoint now) {
  int rank = -1;
  {
    std::lock_guard lock(mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    rank = it->second.rank;
    watchers_.erase(it);
    if (--watching_[rank] > 0) return;  // another stream of this rank is open
  }
  for (const auto& h : health_.ranks())
    if (h.rank == rank && !h.left) {
      spdlog::warn("rank {} (host {}) disconnected without leaving", rank, h.host);
      health_.disconnected(rank, now);
    }
}

Job::Reply Job::report_peer_fault(const std::string& session, int peer, comm::PeerFault fault,
                                  const std::string& detail, TimePoint now) {
  Reply reply;
  auto m = lookup(session, reply.outcome);
  if (m) {
    reply.rank = m->rank;
    spdlog::warn("rank {} lost its data-plane connection to rank {} ({}): {}", m->rank, peer,
                 comm::to_string(fault), detail);
    health_.peer_fault(m->rank, peer, fault, detail, now);
  }
  reply.status = state_.status();
  return reply;
}

void Job::paused(Clock::duration gap, TimePoint now) {
  health_.forgive(now);
  const auto gave_up = options_.heartbeat_timeout - options_.heartbeat_interval;
  if (state_.status().state == State::kRunning && gap >= gave_up) {
    fail(Verdict{
        .cause = Cause::kCoordinatorStalled,
        .message = str("the coordinator itself did not run for ", format_duration(gap),
                       " (it was stopped, e.g. by SIGSTOP or a debugger, or starved of CPU): as "
                       "long as the workers wait for it (heartbeat timeout ",
                       format_duration(options_.heartbeat_timeout),
                       "), so they gave up on it; no rank is at fault. Keep the coordinator's "
                       "host responsive, or raise --heartbeat-timeout-ms")});
    return;
  }
  spdlog::warn(
      "the coordinator did not run for {} (stopped or starved of CPU); the ranks' heartbeat "
      "timeouts start again now",
      format_duration(gap));
}

void Job::abort_waits(const std::string& why) {
  rendezvous_.abort(why);
  fingerprints_.abort(why);
  store_.abort(why);
  barrier_.abort(why);
}

void Job::shutdown(const std::string& why) {
  fail(Verdict{.cause = Cause::kShutdown, .message = why});
  abort_waits(why);  // also when the job was already over
  set_finished();
}

void Job::on_members_changed() {
  int64_t started;
  {
    std::lock_guard lock(mu_);
    if (!members_changed_) return;
    members_changed_ = false;
    started = started_unix_ns_;
  }
  const std::vector<Member> members = rendezvous_.members();
  note_job_file(write_job_file(options_, members, started));
  std::vector<perf::RankPlacement> placement;
  for (const auto& m : members) placement.push_back({m.rank, m.host, m.threads, m.cpus});
  // Judged once every rank of the host reported its threads: a warning
  // from a partial count would name the wrong number, and never be corrected.
  const auto all_reported = [](const perf::HostLoad& h) {
    return std::all_of(h.rank_threads.begin(), h.rank_threads.end(), [](int t) { return t > 0; });
  };
  for (const auto& h : perf::host_loads(placement))
    if (h.oversubscribed() && all_reported(h) && warned_hosts_.insert(h.host).second)
      spdlog::warn(
          "{}: its ranks take turns on the CPUs and wait for each other in every "
          "all-reduce; run fewer ranks per host or fewer --threads",
          h.describe());
}

void Job::tick(TimePoint now) {
  // First: a job that ends at this tick has its final job.json.
  on_members_changed();
  if (auto closed = rendezvous_.expire(now))
    fail(Verdict{.cause = Cause::kRendezvousTimeout, .message = *closed});
  fingerprints_.expire(now);
  store_.expire(now);
  barrier_.expire(now);

  const JobStatus status = state_.status();
  if (status.state == State::kRunning) {
    Health::CheckResult h = health_.check(now);
    if (h.roll_call) spdlog::warn("{}", *h.roll_call);
    if (h.failure) fail(std::move(*h.failure));
  }
  bool all_left = true;
  for (const auto& r : health_.ranks()) all_left = all_left && r.left;
  // A job that is over does not wait for the Leave of a rank whose process is gone.
  if (status.terminal()) all_left = health_.sweep_disconnected(now);
  if (status.state == State::kSucceeded) set_finished();
  if (status.state == State::kFailed) {
    const auto linger = options_.linger.count() > 0
                            ? options_.linger
                            : 3 * options_.heartbeat_interval + std::chrono::seconds(2);
    bool over;
    {
      std::lock_guard lock(mu_);
      if (!failed_at_) failed_at_ = now;
      over = all_left || now >= *failed_at_ + linger;
    }
    if (over) set_finished();
  }
  if (now >= next_sync_) {
    metrics_log_.sync();
    next_sync_ = now + std::chrono::seconds(1);
  }
}

void Job::note_job_file(const std::string& error) {
  std::lock_guard lock(mu_);
  if (!error.empty() && job_file_error_.empty()) spdlog::error("{}", error);
  job_file_error_ = error;  // a later write that works makes job.json whole again
}

std::string Job::job_file_error() const {
  std::lock_guard lock(mu_);
  return job_file_error_;
}

void Job::set_finished() {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
  }
  cv_.notify_all();
  notify_watchers(true);
}

bool Job::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

bool Job::wait_finished(TimePoint deadline) const {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return finished_; });
}

}  // namespace mddp::coordinator
