#include "coordinator/job.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "control/limits.h"
#include "coordinator/job_file.h"
#include "core/common/check.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/perf/host_load.h"

namespace mddp::coordinator {

// Note [Attempts]
// A job runs in attempts, numbered from 0. Each attempt is a rendezvous
// epoch of its own (attempt.h): its own sessions, store, barriers, health,
// and a random nonce from which the ranks derive the data-plane key. When
// an attempt's verdict can be cured by a restart and restarts remain, the
// attempt ends: its waits are aborted, every rank of it hears RESTARTING
// (pushed on its Watch stream, in the reply to its next heartbeat, leave or
// peer report), leaves its data plane and exits to be started again (`run`,
// `microddp worker --restart`, a container's restart policy). The
// next attempt opens at once: its rendezvous window is the same length as
// the first's; joins that arrived while the attempt still ran (a dead rank
// restarted before the coordinator ended the attempt) were parked and now
// join it. Its ranks resume from the last checkpoint in the run directory
// (rank 0 finds it: train.resume_latest). The metrics of each attempt are
// kept once per (attempt, rank, step)
// (Note [Exactly once by (attempt, rank, step)] in metrics_log.h). Which
// verdicts end only their attempt, and the budget, are restarts.h's
// (Note [What is restarted] in restarts.cc).

namespace {

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every worker of the job may hold a Hello's nonce at once (10,000 workers
// say Hello together, before any joins); only a flood beyond twice the
// world size pushes out the oldest.
Admission::Options admission_options(const JobOptions& o) {
  Admission::Options a{o.job_id, o.token, kProtocolVersion};
  a.max_nonces = std::max(a.max_nonces, 2 * static_cast<std::size_t>(std::max(o.world_size, 0)));
  return a;
}

}  // namespace

Job::Job(JobOptions options, TimePoint now)
    : options_(std::move(options)),
      admission_(admission_options(options_)),
      metrics_log_(options_.run_dir),
      membership_log_(options_.run_dir) {
  if (options_.world_size < 1)
    throw InputError(str("--world-size must be at least 1, got ", options_.world_size));
  if (options_.min_nproc < 0 || options_.min_nproc > options_.world_size)
    throw InputError(str("--min-nproc ", options_.min_nproc, " must be in 1..", options_.world_size,
                         " (the world size)"));
  if (options_.max_restarts < 0)
    throw InputError(str("--max-restarts must be 0 or more, got ", options_.max_restarts));
  if (options_.heartbeat_interval.count() <= 0 ||
      options_.heartbeat_timeout <= 2 * options_.heartbeat_interval)
    throw InputError(str("--heartbeat-timeout-ms (", options_.heartbeat_timeout.count(),
                         ") must exceed two heartbeat periods (--heartbeat-ms ",
                         options_.heartbeat_interval.count(), ")"));
  // A run directory with a log already: go on counting attempts after it,
  // so no (attempt, rank, step) is given twice (a new coordinator of a run).
  const int first = first_attempt_ = metrics_log_.last_attempt() + 1;
  state_.set_first_attempt(first);
  // No other thread sees this Job yet: no lock.
  restarts_ = Restarts(options_.max_restarts, first);
  attempts_.push_back(open_attempt(first, now));
  if (first > 0) {  // a run resumed by a new coordinator goes on with its list of restarts
    Restart r{first,
              Verdict{.message = str("a new coordinator took over the run in ",
                                     options_.run_dir.string(), " (attempt ", first, ")")},
              unix_ns_now()};
    restarts_.take_over(earlier_restarts(options_.run_dir), r);
    nlohmann::json line = verdict_json(r.verdict);
    line.update({{"kind", "restart"}, {"attempt", first}, {"time_unix_ns", r.unix_ns}});
    note_metrics_error(metrics_log_.event(line));
  }
}

std::shared_ptr<Attempt> Job::open_attempt(int number, TimePoint now, Reform how, int size) {
  Rendezvous::Options rv{options_.job_id,       options_.world_size,         options_.min_nproc,
                         options_.elastic_wait, options_.rendezvous_timeout, number};
  if (how != Reform::kRestart) {
    // Formed as soon as every member is there; one that does not come
    // within a heartbeat timeout (it died or hung meanwhile) is left out,
    // down to max(1, --min-nproc), as the elastic rendezvous does.
    rv.world_size = size;
    rv.min_nproc = std::min(size, std::max(1, options_.min_nproc));
    rv.elastic_wait = options_.heartbeat_timeout;
  }
  return std::make_shared<Attempt>(
      number, rv, Health::Options{options_.heartbeat_interval, options_.heartbeat_timeout}, now,
      [this](Attempt& a, const std::vector<Member>& members, TimePoint t) {
        on_formed(a, members, t);
      });
}

std::shared_ptr<Attempt> Job::current() const {
  std::lock_guard lock(mu_);
  return attempts_.back();
}

bool Job::may_wait_for_next(const std::shared_ptr<Attempt>& attempt) const {
  std::lock_guard lock(mu_);
  return !state_.status().terminal() && (attempts_.back() != attempt || restarts_.left());
}

void Job::on_formed(Attempt& attempt, const std::vector<Member>& members, TimePoint) {
  const std::string table = mddp::join(members, ", ", [](const Member& m) {
    return str(m.rank, " = ", m.host, " (pid ", m.pid,
               m.device.empty() ? std::string() : ", " + m.device, ")");
  });
  const int n = static_cast<int>(members.size());
  {
    std::lock_guard lock(mu_);
    if (started_unix_ns_ == 0) started_unix_ns_ = unix_ns_now();
  }
  save_job_file();
  const nlohmann::json line{{"kind", "attempt"},
                            {"attempt", attempt.number()},
                            {"world_size", n},
                            {"time_unix_ns", unix_ns_now()}};
  note_metrics_error(metrics_log_.event(line));
  const nlohmann::json config = nlohmann::json::parse(options_.config_json, nullptr, false);
  const int64_t global_batch = config.is_object() ? config.value("batch", int64_t{0}) *
                                                        config.value("accumulate", int64_t{1})
                                                  : 0;
  membership_log_.formed(attempt.number(), how_formed(attempt.number()), members, global_batch,
                         ended_unix_ns(attempt.number()));
  state_.set_running();
  if (attempt.number() == first_attempt_ && n == options_.world_size)
    spdlog::info("rendezvous complete: all {} workers joined job '{}' (rank {})", n,
                 options_.job_id, table);
  else if (n == options_.world_size)
    spdlog::info("attempt {} of job '{}' formed with all {} workers (rank {})", attempt.number(),
                 options_.job_id, n, table);
  else
    spdlog::warn(
        "attempt {} of job '{}' formed with {} of {} workers ({}): the world size "
        "changed to {}, the global batch is split over {} ranks (rank {})",
        attempt.number(), options_.job_id, n, options_.world_size,
        options_.shrink ? std::string("--on-failure shrink")
                        : str("--min-nproc ", options_.min_nproc),
        n, n, table);
}

std::optional<Job::Caller> Job::lookup(const std::string& session, Outcome& refusal,
                                       bool ended_ok) const {
  std::vector<std::shared_ptr<Attempt>> attempts;
  {
    std::lock_guard lock(mu_);
    attempts = attempts_;
  }
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
    auto m = (*it)->rendezvous().member(session);
    if (!m) continue;
    const bool current = it == attempts.rbegin();
    if (!current && !ended_ok) {
      refusal =
          Outcome::error(Code::kFailedPrecondition,
                         str("session of attempt ", (*it)->number(), "; the job is in attempt ",
                             attempts.back()->number(), " (rank ", m->rank,
                             "'s attempt ended: join again; nothing of the old attempt is taken)"));
      return std::nullopt;
    }
    return Caller{*it, (*it)->formed(), *m, current};
  }
  refusal = Outcome::error(
      Code::kUnauthenticated,
      "unknown session: join first (or the coordinator was restarted and this worker "
      "belongs to its old job)");
  return std::nullopt;
}

std::optional<Job::Caller> Job::status_caller(const std::string& session, Reply& reply) const {
  auto c = lookup(session, reply.outcome, true);
  if (!c) {
    reply.status = state_.status();
    return c;
  }
  reply.rank = c->member.rank;
  reply.attempt = c->attempt->number();
  reply.status = status_for(*c->attempt);
  return c;
}

JobStatus Job::status_for(const Attempt& attempt) const {
  JobStatus s = state_.status();
  if (s.terminal()) return s;
  if (auto why = attempt.ended()) {
    s.state = State::kRestarting;
    s.verdict = *why;
  }
  return s;
}

std::optional<Member> Job::member(const std::string& session) const {
  Outcome ignored;
  auto c = lookup(session, ignored, true);
  return c ? std::optional<Member>(c->member) : std::nullopt;
}

std::vector<Member> Job::members() const {
  return current()->rendezvous().members();
}

int Job::world_size() const {
  const int n = current()->world_size();
  return n > 0 ? n : options_.world_size;
}

std::vector<RankHealth> Job::ranks() const {
  auto f = current()->formed();
  return f ? f->health.ranks() : std::vector<RankHealth>{};
}

std::size_t Job::store_size() const {
  auto f = current()->formed();
  return f ? f->store.size() : 0;
}

int Job::joined() const {
  return current()->rendezvous().joined();
}

std::string Job::config_for(int attempt) const {
  if (attempt <= first_attempt_) return options_.config_json;
  bool reformed;
  {
    std::lock_guard lock(mu_);
    reformed = reformed_.count(attempt) > 0;
  }
  // From the survivors' memory, or from the newest checkpoint.
  return config_with(reformed ? "from_peers" : "resume_latest");
}

std::string Job::newcomer_config() const {
  return config_with("from_peers");
}

std::string Job::config_with(const char* flag) const {
  nlohmann::json config = nlohmann::json::parse(options_.config_json, nullptr, false);
  if (!config.is_object()) return options_.config_json;
  config[flag] = true;
  return config.dump();
}

std::vector<Restart> Job::restarts() const {
  std::lock_guard lock(mu_);
  return restarts_.history();
}

Admission::Challenge Job::hello(const std::string& job_id, uint32_t protocol_version,
                                const std::string& peer, TimePoint now) {
  Admission::Challenge c = admission_.hello(job_id, protocol_version, now);
  if (!c.outcome.ok())
    spdlog::warn("hello from {} refused ({}): {}", peer, to_string(c.outcome.code),
                 c.outcome.message);
  return c;
}

Ticket Job::join(JoinRequest request, TimePoint deadline, TimePoint now,
                 Rendezvous::JoinCallback done) {
  const Ticket ticket{Ticket::Kind::kJoin, next_ticket_id()};
  const std::string who = str(request.peer.empty() ? "" : request.peer + " ", "(host ",
                              request.host, " pid ", request.pid, ")");
  if (Outcome refused = admission_.admit(request, now); !refused.ok()) {
    // Logged with the caller's address; the job itself is untouched.
    spdlog::warn("join from {} refused ({}): {}", who, to_string(refused.code), refused.message);
    done(JoinResult{refused, {}, {}, 0, {}});
    return ticket;
  }
  spdlog::info("join from {}{}", who,
               request.requested_rank >= 0 ? str(" (asks for rank ", request.requested_rank, ")")
                                           : std::string());
  join_attempt(
      std::move(request), deadline, now,
      [who, done = std::move(done)](JoinResult r) {
        if (!r.outcome.ok() && r.outcome.code != Code::kAborted)
          spdlog::warn("join from {} refused ({}): {}", who, to_string(r.outcome.code),
                       r.outcome.message);
        done(std::move(r));
      },
      ticket.id);
  return ticket;
}

void Job::join_attempt(JoinRequest request, TimePoint deadline, TimePoint now,
                       Rendezvous::JoinCallback done, uint64_t id) {
  std::shared_ptr<Attempt> attempt;
  {
    std::lock_guard lock(mu_);
    attempt = attempts_.back();
    const std::pair<std::string, int64_t> who{request.host, request.pid};
    const bool reforming = !attempt->formed() && !survivors_.empty();
    const bool member = survivors_.count(who) || newcomers_.count(who);  // of a re-form
    // A survivor's rank is the place of its old one among theirs; a newcomer's, after them.
    if (reforming && survivors_.count(who)) request.requested_rank = survivors_.at(who);
    if (reforming && newcomers_.count(who)) request.requested_rank = -1;
    if (reforming && !member && !options_.heal) {
      const std::string why =
          str("attempt ", attempt->number(), " re-forms from the survivors of attempt ",
              attempt->number() - 1,
              " alone (--on-failure shrink): a new worker cannot join a job that shrank");
      done(JoinResult{Outcome::error(Code::kFailedPrecondition, why), {}, {}, 0, {}});
      return;
    }
    const bool live = !state_.status().terminal();
    // A newcomer to a running job first builds its model, while the job
    // trains on; it is parked once it joins again, ready (Note [Healing]).
    if (options_.heal && live && !request.ready && !member && (attempt->formed() || reforming)) {
      spdlog::info(
          "host {} pid {} joins the running job: it builds its model first (--on-failure heal)",
          request.host, request.pid);
      JoinResult r{Outcome::success(), {}, options_.world_size, 0, {}};
      r.prepare = true;
      done(std::move(r));
      return;
    }
    // The attempt runs (or re-forms without it): a worker waits for the next
    // one while one may come. With heal, the next comes once this one runs
    // (grow_if_joined), unless it already has every rank.
    if (live &&
        ((attempt->formed() && (restarts_.left() || options_.heal)) || (reforming && !member))) {
      spdlog::info("host {} pid {} waits for the next attempt: attempt {} {}", request.host,
                   request.pid, attempt->number(),
                   attempt->formed() ? "runs" : "re-forms from the survivors first");
      parked_.emplace(id, Parked{std::move(request), deadline, std::move(done)});
      return;
    }
  }
  JoinRequest copy = request;
  attempt->rendezvous().join(
      std::move(request), deadline, now,
      [this, attempt, copy = std::move(copy), deadline, id,
       done = std::move(done)](JoinResult r) mutable {
        // Formed by the others just now, or ended meanwhile: wait for the next attempt.
        const bool retry =
            (r.outcome.code == Code::kResourceExhausted || r.outcome.code == Code::kAborted) &&
            may_wait_for_next(attempt);
        if (retry) {
          join_attempt(std::move(copy), deadline, Clock::now(), std::move(done), id);
          return;
        }
        if (r.outcome.ok()) {
          r.attempt = attempt->number();
          r.attempt_nonce = attempt->nonce();
        }
        done(std::move(r));
      },
      id);
}

Ticket Job::validate(const std::string& session, Fingerprint fp, TimePoint deadline, TimePoint now,
                     FingerprintCheck::Callback done) {
  Outcome refusal;
  auto c = lookup(session, refusal, false);
  if (!c) {
    done(refusal);
    return {};
  }
  const Member m = c->member;
  const std::string who = str("rank ", m.rank, " (host ", m.host, ")");
  return c->formed->fingerprints.submit(
      m.rank, who, std::move(fp), deadline, now,
      [this, m, attempt = c->attempt, done = std::move(done)](Outcome o) {
        if (o.ok()) {
          spdlog::info("rank {} validated its model", m.rank);
        } else if (o.code == Code::kFailedPrecondition) {
          fail(Verdict{.cause = Cause::kModelMismatch,
                       .rank = m.rank,
                       .host = m.host,
                       .pid = m.pid,
                       .doing = "setup",
                       .message = o.message},
               Clock::now(), attempt);
        } else if (o.code != Code::kAborted) {
          spdlog::warn("rank {} validation: {}", m.rank, o.message);
        }
        done(std::move(o));
      });
}

Outcome Job::set(const std::string& session, const std::string& key, std::string value) {
  Outcome refusal;
  auto c = lookup(session, refusal, false);
  if (!c) return refusal;
  spdlog::debug("rank {} set '{}' ({} bytes)", c->member.rank, key, value.size());
  Outcome o = c->formed->store.set(key, std::move(value));
  if (!o.ok() && o.code != Code::kAborted)
    spdlog::warn("rank {} set '{}': {}", c->member.rank, key, o.message);
  return o;
}

Ticket Job::get(const std::string& session, const std::string& key, TimePoint deadline,
                TimePoint now, KvStore::GetCallback done) {
  Outcome refusal;
  auto c = lookup(session, refusal, false);
  if (!c) {
    done(refusal, {});
    return {};
  }
  const int rank = c->member.rank;
  return c->formed->store.get(key, deadline, now,
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
  auto c = lookup(session, refusal, false);
  if (!c) {
    done(refusal, 0);
    return {};
  }
  const int rank = c->member.rank;
  return c->formed->barrier.arrive(
      name, rank, deadline, now, [rank, name, done = std::move(done)](Outcome o, int64_t gen) {
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
  auto c = status_caller(session, reply);
  if (!c || !c->current) return reply;
  c->formed->health.heartbeat(c->member.rank, progress, now);
  spdlog::trace("heartbeat rank {}: {} of step {}", c->member.rank, progress.phase, progress.step);
  if (resources && c->attempt->rendezvous().update_resources(c->member.rank, *resources)) {
    spdlog::debug("rank {} (host {}) runs on {} with {} compute threads, {} CPUs", c->member.rank,
                  c->member.host, resources->device, resources->threads, resources->cpus);
    std::lock_guard lock(mu_);
    members_changed_ = true;
  }
  return reply;
}

Job::Reply Job::metrics(const std::string& session, int attempt,
                        std::vector<MetricsRecord> records) {
  Reply reply;
  auto c = status_caller(session, reply);
  if (!c) return reply;
  // The attempt just ended may deliver what it has while the next one
  // forms; once that one runs, an old attempt's records are refused.
  if (!c->current && current()->formed()) {
    reply.outcome =
        Outcome::error(Code::kFailedPrecondition,
                       str("session of attempt ", c->attempt->number(), "; the job is in attempt ",
                           current()->number(), ": its metrics are no longer taken"));
    return reply;
  }
  if (records.size() > kMaxMetricsBatch) {
    reply.outcome = Outcome::error(Code::kInvalidArgument,
                                   str("a metrics batch of ", records.size(), " records (at most ",
                                       kMaxMetricsBatch, " in one message)"));
    return reply;
  }
  for (const auto& r : records)
    if (r.metrics.buckets.size() > kMaxBucketsPerRecord) {
      reply.outcome = Outcome::error(
          Code::kInvalidArgument,
          str("a metrics record of step ", r.metrics.step, " with ", r.metrics.buckets.size(),
              " bucket spans (at most ", kMaxBucketsPerRecord, ")"));
      return reply;
    }
  if (attempt != c->attempt->number()) {
    reply.outcome = Outcome::error(
        Code::kInvalidArgument,
        str("metrics of attempt ", attempt, " on a session of attempt ", c->attempt->number()));
    return reply;
  }
  for (auto& r : records) {
    r.metrics.rank = c->member.rank;
    r.attempt = c->attempt->number();
  }
  note_membership(attempt, records);
  note_metrics_error(metrics_log_.append(std::move(records)));
  reply.status = status_for(*c->attempt);
  return reply;
}

int64_t Job::ended_unix_ns(int attempt) const {
  std::lock_guard lock(mu_);
  for (const Restart& r : restarts_.history())
    if (r.attempt == attempt) return r.unix_ns;
  return unix_ns_now();  // the first: from when it formed
}

std::string Job::how_formed(int attempt) const {
  if (attempt == first_attempt_) return "start";
  std::lock_guard lock(mu_);
  for (const Restart& r : restarts_.history())
    if (r.attempt == attempt) return r.grow ? "grow" : r.shrink ? "shrink" : "restart";
  return "restart";
}

void Job::note_membership(int attempt, const std::vector<MetricsRecord>& records) {
  const MetricsRecord* first = nullptr;
  for (const MetricsRecord& r : records)
    if (!r.metrics.eval && (!first || r.metrics.step < first->metrics.step)) first = &r;
  if (!first) return;
  std::optional<nlohmann::json> line =
      membership_log_.trained(attempt, first->metrics.step, first->time_unix_ns);
  if (!line) return;
  note_metrics_error(membership_log_.error());
  (*line)["kind"] = "membership";
  note_metrics_error(metrics_log_.event(*line));
}

Job::Reply Job::leave(const std::string& session, bool ok, const std::string& message,
                      TimePoint now) {
  Reply reply;
  auto c = status_caller(session, reply);
  if (!c || !c->current) return reply;  // an ended attempt's: nothing it says counts
  const Member& m = c->member;
  if (ok)
    spdlog::info("rank {} (host {}) left: done", m.rank, m.host);
  else
    spdlog::error("rank {} (host {}) left with a failure: {}", m.rank, m.host, message);
  const Health::LeaveResult left = c->formed->health.leave(m.rank, ok, message, now);
  if (left.failure) fail(*left.failure, now, c->attempt);
  if (left.all_ok && state_.succeed())
    spdlog::info("job '{}' succeeded: all {} ranks finished", options_.job_id,
                 c->formed->world_size);
  // finished() follows at the next tick, not here: this reply must get out
  // before the server starts shutting down.
  reply.status = status_for(*c->attempt);
  return reply;
}

void Job::cancel(Ticket ticket) {
  switch (ticket.kind) {
    case Ticket::Kind::kNone:
      break;
    case Ticket::Kind::kJoin: {
      std::optional<Parked> parked;
      std::vector<std::shared_ptr<Attempt>> attempts;
      {
        std::lock_guard lock(mu_);
        if (auto it = parked_.find(ticket.id); it != parked_.end()) {
          parked = std::move(it->second);
          parked_.erase(it);
        }
        attempts = attempts_;
      }
      if (parked)
        parked->done(JoinResult{
            Outcome::error(Code::kCancelled, "the worker cancelled its join"), {}, {}, 0, {}});
      for (const auto& a : attempts) a->rendezvous().cancel(ticket.id);
      break;
    }
    case Ticket::Kind::kValidate:
      if (auto f = current()->formed()) f->fingerprints.cancel(ticket.id);
      break;
    case Ticket::Kind::kGet:
      if (auto f = current()->formed()) f->store.cancel(ticket.id);
      break;
    case Ticket::Kind::kBarrier:
      if (auto f = current()->formed()) f->barrier.cancel(ticket.id);
      break;
  }
}

// Note [Shrinking]
// ~~~~~~~~~~~~~~~~
// With --on-failure shrink, a verdict that names one rank at fault (it
// died, or went silent; not its own error, such as a NaN loss or Ctrl-C,
// which fails the job) ends the attempt like a restart, but the next
// attempt is formed by the survivors alone, at once: its rendezvous expects
// them and completes as soon as they are there, giving them ranks 0..n-2
// in the order of their old ranks. A survivor that does not come within a
// heartbeat timeout (it died or hung meanwhile) is left out, down to
// max(1, --min-nproc). The survivors hear RESTARTING with that verdict and re-join
// from their running processes, keeping their state (Note [Survivors train
// on] in core/train/distributed.cc); the rank named, if it still runs,
// stops. Below max(1, --min-nproc) survivors the job fails instead. A
// shrink spends no --max-restarts; the failures that name no single rank
// (a broken link, ...) restart as --max-restarts says, every process
// starting again.
void Job::fail(Verdict verdict, TimePoint now, const std::shared_ptr<Attempt>& attempt) {
  bool restart_it, shrink_it;
  std::string note;
  {
    std::lock_guard lock(mu_);
    // A verdict of an attempt that ended already is an echo of why it ended.
    if (attempt != attempts_.back() || attempt->ended()) return;
    const bool live = !state_.status().terminal();
    // A rank that died or hung: the others go on without it. Its own error
    // (a NaN loss, a bad file, Ctrl-C) or another model is not cured so.
    const bool one_rank =
        options_.shrink && control::restartable(verdict.cause) && verdict.failed_rank() >= 0;
    const int survivors = attempt->world_size() - 1;
    shrink_it = one_rank && live && survivors >= std::max(1, options_.min_nproc);
    restart_it = !one_rank && restarts_.cures(verdict) && live;
    note = one_rank ? str(" (--on-failure shrink: ", survivors, " rank", survivors == 1 ? "" : "s",
                          " left, fewer than --min-nproc ", std::max(1, options_.min_nproc), ")")
                    : restarts_.failure_note(verdict, attempt->number());
  }
  if (restart_it || shrink_it) {
    restart(attempt, std::move(verdict), now, shrink_it ? Reform::kShrink : Reform::kRestart);
    return;
  }
  verdict.message += note;
  fail_job(std::move(verdict));
}

void Job::fail_job(Verdict verdict) {
  const std::string message = verdict.message;
  if (!state_.fail(std::move(verdict))) return;
  spdlog::error("job '{}' failed: {}", options_.job_id, message);
  current()->abort("the job failed: " + message);
  std::vector<Parked> parked;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, p] : parked_) parked.push_back(std::move(p));
    parked_.clear();
  }
  for (auto& p : parked)
    p.done(JoinResult{Outcome::error(Code::kAborted, "the job failed: " + message), {}, {}, 0, {}});
  watchers_.notify(-1, state_.status(), false);
}

void Job::restart(const std::shared_ptr<Attempt>& ended, Verdict verdict, TimePoint now,
                  Reform how) {
  const int next_number = ended->number() + 1;
  const std::string why = str("attempt ", ended->number(), " ended: ", verdict.message);
  if (!ended->end(verdict, why + str("; join attempt ", next_number))) return;
  const int from = ended->world_size();
  std::map<std::pair<std::string, int64_t>, int> survivors;  // -> its rank in the next attempt
  std::set<std::pair<std::string, int64_t>> newcomers;
  if (how != Reform::kRestart)
    for (const Member& m : ended->rendezvous().members())  // in rank order
      if (m.rank != verdict.failed_rank())
        survivors.emplace(std::pair{m.host, m.pid}, static_cast<int>(survivors.size()));
  std::map<uint64_t, Parked> parked;
  int used, size = static_cast<int>(survivors.size());
  {
    std::lock_guard lock(mu_);
    parked.swap(parked_);
    if (how == Reform::kGrow)  // the parked workers that fit, in the order they came
      for (const auto& [id, p] : parked)
        if (size < options_.world_size && newcomers.emplace(p.request.host, p.request.pid).second)
          ++size;
  }
  std::shared_ptr<Attempt> next = open_attempt(next_number, now, how, size);
  {
    std::lock_guard lock(mu_);
    attempts_.push_back(next);
    restarts_.record(
        Restart{next_number, verdict, unix_ns_now(), how == Reform::kShrink, how == Reform::kGrow});
    used = restarts_.used();
    survivors_ = std::move(survivors);
    newcomers_ = std::move(newcomers);
    if (how != Reform::kRestart) reformed_.insert(next_number);
    failed_at_.reset();
    members_changed_ = true;  // job.json: the restart, the attempt
  }
  state_.restart(next_number);
  say_restart(why, how, from, size, next_number, used);
  nlohmann::json line = verdict_json(verdict);
  line.update({{"kind", "restart"},
               {"attempt", next_number},
               {"restart", used},
               {"max_restarts", options_.max_restarts},
               {"time_unix_ns", unix_ns_now()}});
  if (how == Reform::kShrink) line["shrink"] = true;  // the survivors went on in their processes
  if (how == Reform::kGrow) line["grow"] = true;      // and workers joined them
  note_metrics_error(metrics_log_.event(line));
  watchers_.notify(ended->number(), status_for(*ended), true);
  for (auto& [id, p] : parked)
    join_attempt(std::move(p.request), p.deadline, now, std::move(p.done), id);
}

void Job::say_restart(const std::string& why, Reform how, int from, int size, int next,
                      int used) const {
  if (how == Reform::kShrink)
    spdlog::warn(
        "{}; --on-failure {}: the other {} ranks form attempt {} now and train on from the "
        "state they hold",
        why, options_.heal ? "heal" : "shrink", size, next);
  else if (how == Reform::kGrow)
    spdlog::warn(
        "{}; --on-failure heal: attempt {} forms now with the {} ranks and {} newcomer{}, which "
        "take the state from them",
        why, next, from, size - from, size - from == 1 ? "" : "s");
  else
    spdlog::warn(
        "{}; restart {} of {} (--max-restarts): attempt {} forms now, every rank joins again "
        "and resumes from the last checkpoint",
        why, used, options_.max_restarts, next);
}

// Note [Healing]
// ~~~~~~~~~~~~~~
// With --on-failure heal, a job that shrank grows back: a worker that joins
// while the attempt runs on fewer than --world-size ranks (the dead one
// started again, a replacement on another host) is parked, and at the next
// tick the attempt ends with a verdict of cause "grow" and the next one
// forms from its ranks and the parked workers that fit. A newcomer's first
// join is answered at once with "prepare" and the config (no session): it
// builds its model and optimiser, then joins again, ready, so the job
// pauses for the copy and not for the newcomer's set-up. The survivors hear
// RESTARTING, abandon the step in flight and re-join in their processes
// keeping their state, asking for their old ranks; the newcomers take the
// ranks after them. Every rank of a re-formed attempt is told from_peers,
// so a rank that holds no state takes it from the live ones over the data
// plane (Note [Survivors train on] in core/train/distributed.cc): no disk
// is read, and the run directory's host may be the one that was lost. A
// grow spends no --max-restarts.
void Job::grow_if_joined(TimePoint now) {
  std::shared_ptr<Attempt> attempt;
  std::string who;
  {
    std::lock_guard lock(mu_);
    attempt = attempts_.back();
    if (!options_.heal || parked_.empty() || !attempt->formed() || attempt->ended() ||
        state_.status().state != State::kRunning || attempt->world_size() >= options_.world_size)
      return;
    const JoinRequest& first = parked_.begin()->second.request;
    who = str("host ", first.host, " pid ", first.pid,
              parked_.size() > 1 ? str(" and ", parked_.size() - 1, " more") : std::string());
  }
  restart(attempt,
          Verdict{.cause = Cause::kGrow,
                  .message = str(who, " joined: the job grows back towards ", options_.world_size,
                                 " ranks (--on-failure heal)")},
          now, Reform::kGrow);
}

Job::WatchReply Job::watch(const std::string& session, TimePoint now, WatchCallback on_change) {
  WatchReply reply;
  auto c = lookup(session, reply.outcome, true);
  if (!c) return reply;
  reply.rank = c->member.rank;
  reply.status = status_for(*c->attempt);
  if (!c->current) {  // its attempt is over: say so, and that is all
    reply.finished = true;
    return reply;
  }
  reply.id = next_ticket_id();
  watchers_.add(reply.id, c->attempt->number(), c->member.rank, std::move(on_change));
  const Clock::duration away = c->formed->health.connected(c->member.rank, now);
  if (away > Clock::duration::zero())
    spdlog::warn("rank {} (host {}) is connected again after {} away", c->member.rank,
                 c->member.host, format_duration(away));
  spdlog::debug("rank {} watches the job", c->member.rank);
  reply.status = status_for(*c->attempt);  // again: the attempt may have ended meanwhile
  reply.finished = reply.status.state == State::kRestarting;
  return reply;
}

void Job::unwatch(uint64_t id, TimePoint now) {
  const auto closed = watchers_.remove(id);  // set when it was the rank's last stream
  if (!closed) return;
  const auto [attempt, rank] = *closed;
  const std::shared_ptr<Attempt> a = current();
  if (a->number() != attempt || a->ended()) return;  // an ended attempt's ranks go anyway
  auto f = a->formed();
  for (const auto& h : f->health.ranks())
    if (h.rank == rank && !h.left) {
      spdlog::warn("rank {} (host {}) disconnected without leaving", rank, h.host);
      f->health.disconnected(rank, now);
    }
}

void Job::check_join_connections(const ConnectionClosed& closed, TimePoint now) {
  const std::shared_ptr<Attempt> a = current();
  const auto f = a->formed();
  if (!f || a->ended()) return;
  const std::vector<Member> members = a->rendezvous().members();
  for (const auto& h : f->health.ranks()) {
    if (h.left || h.disconnected || watchers_.watching(a->number(), h.rank)) continue;
    const auto r = static_cast<std::size_t>(h.rank);
    if (r >= members.size() || !closed(members[r].peer)) continue;
    spdlog::warn("rank {} (host {}) closed its connection before it watched the job", h.rank,
                 h.host);
    f->health.disconnected(h.rank, now);
  }
}

Job::Reply Job::report_peer_fault(const std::string& session, int peer, comm::PeerFault fault,
                                  const std::string& detail, TimePoint now) {
  Reply reply;
  auto c = status_caller(session, reply);
  if (!c) return reply;
  if (c->current) {
    spdlog::warn("rank {} lost its data-plane connection to rank {} ({}): {}", c->member.rank, peer,
                 comm::to_string(fault), detail);
    c->formed->health.peer_fault(c->member.rank, peer, fault, detail, now);
  }
  reply.status = status_for(*c->attempt);
  return reply;
}

void Job::paused(Clock::duration gap, TimePoint now) {
  const std::shared_ptr<Attempt> attempt = current();
  if (auto f = attempt->formed()) f->health.forgive(now);
  const auto gave_up = options_.heartbeat_timeout - options_.heartbeat_interval;
  if (state_.status().state == State::kRunning && gap >= gave_up) {
    fail(Verdict{.cause = Cause::kCoordinatorStalled,
                 .message =
                     str("the coordinator itself did not run for ", format_duration(gap),
                         " (it was stopped, e.g. by SIGSTOP or a debugger, or starved of CPU): as "
                         "long as the workers wait for it (heartbeat timeout ",
                         format_duration(options_.heartbeat_timeout),
                         "), so they gave up on it; no rank is at fault. Keep the coordinator's "
                         "host responsive, or raise --heartbeat-timeout-ms")},
         now, attempt);
    return;
  }
  spdlog::warn(
      "the coordinator did not run for {} (stopped or starved of CPU); the ranks' heartbeat "
      "timeouts start again now",
      format_duration(gap));
}

void Job::shutdown(const std::string& why) {
  fail_job(Verdict{.cause = Cause::kShutdown, .message = why});
  current()->abort(why);  // also when the job was already over
  set_finished();
}

void Job::save_job_file() {
  if (options_.run_dir.empty()) return;
  const std::lock_guard one_writer(job_file_mu_);
  const std::shared_ptr<Attempt> attempt = current();
  JobFile f{.job_id = options_.job_id,
            .world_size = world_size(),
            .max_world_size = options_.world_size,
            .min_nproc = options_.min_nproc,
            .attempt = attempt->number(),
            .max_restarts = options_.max_restarts,
            .resumes = metrics_log_.resumes(),
            .config_json = options_.config_json,
            .members = attempt->rendezvous().members()};
  {
    std::lock_guard lock(mu_);
    f.started_unix_ns = started_unix_ns_;
    for (const auto& a : attempts_) f.attempts.push_back({a->number(), a->world_size()});
    f.restarts = restarts_.history();
  }
  note_job_file(write_job_file(options_.run_dir, f));
}

void Job::on_members_changed() {
  {
    std::lock_guard lock(mu_);
    if (!members_changed_) return;
    members_changed_ = false;
  }
  save_job_file();
  std::vector<perf::RankPlacement> placement;
  for (const auto& m : members()) placement.push_back({m.rank, m.host, m.threads, m.cpus});
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
  const std::shared_ptr<Attempt> attempt = current();
  if (auto closed = attempt->expire(now))
    fail(Verdict{.cause = Cause::kRendezvousTimeout, .message = *closed}, now, attempt);
  std::vector<Parked> late;
  {
    std::lock_guard lock(mu_);
    for (auto it = parked_.begin(); it != parked_.end();)
      if (now >= it->second.deadline) {
        late.push_back(std::move(it->second));
        it = parked_.erase(it);
      } else {
        ++it;
      }
  }
  for (auto& p : late)
    p.done(
        JoinResult{Outcome::error(Code::kDeadlineExceeded,
                                  "gave up waiting for the next attempt (the worker's deadline)"),
                   {},
                   {},
                   0,
                   {}});

  const std::shared_ptr<Attempt::Formed> formed = attempt->formed();
  const JobStatus status = state_.status();
  if (status.state == State::kRunning && formed && !attempt->ended()) {
    Health::CheckResult h = formed->health.check(now);
    if (h.roll_call) spdlog::warn("{}", *h.roll_call);
    if (h.failure) fail(std::move(*h.failure), now, attempt);
  }
  grow_if_joined(now);
  bool all_left = true;
  if (formed)
    for (const auto& r : formed->health.ranks()) all_left = all_left && r.left;
  // A job that is over does not wait for the Leave of a rank whose process is gone.
  if (status.terminal() && formed) all_left = formed->health.sweep_disconnected(now);
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

void Job::note_metrics_error(const std::string& error) {
  if (error.empty()) return;
  std::lock_guard lock(mu_);
  if (!metrics_write_failed_)
    spdlog::error(
        "metrics log: {} (the records that do not fit are counted and named at the end; "
        "writing goes on as space comes back)",
        error);
  metrics_write_failed_ = true;
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
  watchers_.notify(-1, state_.status(), true);
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
