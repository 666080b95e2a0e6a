#include "worker/heartbeat.h"

#include <grpcpp/support/status_code_enum.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/duration.h"

namespace mddp::worker {

Heartbeat::Heartbeat(CoordinatorClient& client, const ProgressBoard& board, Options options)
    : client_(client), board_(board), options_(options) {}

Heartbeat::~Heartbeat() {
  stop();
}

void Heartbeat::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { loop(); });
}

void Heartbeat::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::attach(comm::ProcessGroup* comm) {
  std::lock_guard lock(mu_);
  comm_ = comm;
  if (comm_ && reason_) comm_->abort(reason_->message);
}

void Heartbeat::attach(comm::AbortSignal* setup) {
  std::lock_guard lock(mu_);
  setup_ = setup;
  if (setup_ && reason_) setup_->abort(reason_->message);
}

void Heartbeat::set_resources(control::Resources resources) {
  {
    std::lock_guard lock(mu_);
    resources_ = std::move(resources);
    send_now_ = true;  // a short job may end before the next beat
  }
  cv_.notify_all();
}

std::optional<StopReason> Heartbeat::stop_reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

std::optional<StopReason> Heartbeat::wait_stop_reason(Millis timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return reason_.has_value(); });
  return reason_;
}

namespace {

// This rank's own reason: FAILED, with no verdict of the coordinator's.
StopReason own_reason(std::string message, bool coordinator_lost) {
  return {{control::State::kFailed, {}, 0}, std::move(message), coordinator_lost};
}

}  // namespace

void Heartbeat::fail_locally(const std::string& message) {
  stop_for(own_reason(message, false));
}

void Heartbeat::heard(const control::JobStatus& status) {
  if (status.state == control::State::kRestarting)
    stop_for({status,
              "this rank's attempt ended (the job re-forms in the next): " + status.verdict.message,
              false});
  else if (status.state == control::State::kFailed)
    stop_for({status, "the job failed: " + status.verdict.message, false});
}

void Heartbeat::stop_for(StopReason reason) {
  std::lock_guard lock(mu_);
  if (reason_) return;
  reason_ = std::move(reason);
  stopping_ = true;
  if (comm_) comm_->abort(reason_->message);
  if (setup_) setup_->abort(reason_->message);
  cv_.notify_all();
}

void ClockOffset::add(const HeartbeatInfo::ClockSample& s) {
  if (s.coordinator_unix_ns == 0) return;  // an old coordinator that does not stamp
  window_[count_++ % kWindow] = s;
  const int n = std::min(count_, kWindow);
  const auto best = std::min_element(window_, window_ + n, [](const auto& a, const auto& b) {
    return a.reply_ns - a.send_ns < b.reply_ns - b.send_ns;
  });
  offset_.store(best->coordinator_unix_ns - (best->send_ns + best->reply_ns) / 2,
                std::memory_order_relaxed);
}

control::Progress Heartbeat::progress() const {
  control::Progress p;
  p.step = board_.step();
  p.phase = board_.phase();
  p.total_steps = board_.total_steps();
  std::lock_guard lock(mu_);
  if (comm_) {
    // The history's last record is the collective entered last; the last one
    // with an end time is the last completed (they run in FIFO order).
    const auto h = comm_->history();
    if (!h.empty()) {
      p.collective_entered = static_cast<int64_t>(h.back().seq);
      p.op = h.back().op;
      for (auto it = h.rbegin(); it != h.rend(); ++it)
        if (it->end_ns != 0) {
          p.collective_completed = static_cast<int64_t>(it->seq);
          break;
        }
    }
  }
  return p;
}

void Heartbeat::loop() {
  using Clock = std::chrono::steady_clock;
  auto last_ok = Clock::now();
  // A call must not outlive the interval by much, nor eat the whole timeout.
  const Millis call_deadline =
      std::clamp(options_.interval, Millis(250), std::max(Millis(250), options_.timeout / 2));
  bool warned = false;
  for (;;) {
    const auto next = Clock::now() + options_.interval;
    try {
      std::optional<control::Resources> resources;
      {
        std::lock_guard lock(mu_);
        resources = resources_;
        send_now_ = false;  // this beat carries them
      }
      const HeartbeatInfo info =
          client_.heartbeat(progress(), call_deadline, resources ? &*resources : nullptr);
      last_ok = Clock::now();
      clock_.add(info.clock);
      if (warned) spdlog::info("the coordinator at {} answers again", client_.address());
      warned = false;
      if (info.status.state == control::State::kFailed ||
          info.status.state == control::State::kRestarting) {
        heard(info.status);
        return;
      }
    } catch (const CoordinatorError& e) {
      const auto silent = Clock::now() - last_ok;
      if (e.code() == static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
        stop_for(own_reason(str("the coordinator at ", client_.address(),
                                " no longer knows this worker (", e.what(), "); was it restarted?"),
                            true));
        return;
      }
      if (silent > options_.timeout) {
        stop_for(own_reason(
            str("lost the coordinator at ", client_.address(), ": no answer for ",
                control::format_duration(silent), " (longer than the heartbeat timeout, ",
                control::format_duration(options_.timeout),
                "); it has stopped, or the network to it is down"),
            true));
        return;
      }
      if (!warned) spdlog::warn("{} (retrying)", e.what());
      warned = true;
    }
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, next, [&] { return stop_ || send_now_; });
    if (stop_) return;
  }
}

}  // namespace mddp::worker
