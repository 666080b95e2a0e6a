#include "coordinator/attempt.h"

#include "core/common/hmac.h"

namespace mddp::coordinator {

Attempt::Formed::Formed(int n, Health::Options health)
    : world_size(n), fingerprints(n), barrier(n), health(health) {}

namespace {
Rendezvous::Options numbered(Rendezvous::Options o, int number) {
  o.attempt = number;
  return o;
}
}  // namespace

Attempt::Attempt(int number, Rendezvous::Options rendezvous, Health::Options health,
                 TimePoint opened, FormedHook on_formed)
    : number_(number),
      nonce_(random_bytes(kNonceBytes)),
      health_options_(health),
      on_formed_(std::move(on_formed)),
      rendezvous_(numbered(std::move(rendezvous), number), opened,
                  [this](const std::vector<Member>& members, TimePoint now) {
                    auto formed =
                        std::make_shared<Formed>(static_cast<int>(members.size()), health_options_);
                    std::vector<std::string> hosts;
                    std::vector<int64_t> pids;
                    for (const auto& m : members) {
                      hosts.push_back(m.host);
                      pids.push_back(m.pid);
                    }
                    formed->health.start(hosts, now, pids);
                    {
                      std::lock_guard lock(mu_);
                      formed_ = std::move(formed);
                    }
                    if (on_formed_) on_formed_(*this, members, now);
                  }) {}

std::shared_ptr<Attempt::Formed> Attempt::formed() const {
  std::lock_guard lock(mu_);
  return formed_;
}

int Attempt::world_size() const {
  std::lock_guard lock(mu_);
  return formed_ ? formed_->world_size : 0;
}

bool Attempt::end(const Verdict& why, const std::string& message) {
  {
    std::lock_guard lock(mu_);
    if (ended_) return false;
    ended_ = why;
  }
  abort(message);
  return true;
}

std::optional<Verdict> Attempt::ended() const {
  std::lock_guard lock(mu_);
  return ended_;
}

void Attempt::abort(const std::string& why) {
  rendezvous_.abort(why);
  if (auto f = formed()) {
    f->fingerprints.abort(why);
    f->store.abort(why);
    f->barrier.abort(why);
  }
}

std::optional<std::string> Attempt::expire(TimePoint now) {
  std::optional<std::string> closed = rendezvous_.expire(now);
  if (auto f = formed()) {
    f->fingerprints.expire(now);
    f->store.expire(now);
    f->barrier.expire(now);
  }
  return closed;
}

}  // namespace mddp::coordinator
