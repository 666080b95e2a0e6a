#include "worker/metrics_streamer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace mddp::worker {
namespace {
int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

MetricsStreamer::MetricsStreamer(CoordinatorClient& client, Options options)
    : client_(client), options_(options) {}

MetricsStreamer::~MetricsStreamer() {
  stop();
}

void MetricsStreamer::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { loop(); });
}

void MetricsStreamer::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (stream_) stream_->cancel();  // a write or finish blocked on a gone coordinator returns
  }
  cv_.notify_all();
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MetricsStreamer::push(const perf::StepMetrics& m) {
  {
    std::lock_guard lock(mu_);
    // The bound covers what waits to be sent and what awaits its ack.
    if (queue_.size() + in_flight_ >= options_.capacity) {
      ++dropped_;
      if (queue_.empty()) return;  // all of it is in flight: drop the newest
      queue_.pop_front();
    }
    queue_.push_back({m, unix_ns()});
  }
}

bool MetricsStreamer::flush(Millis timeout) {
  std::unique_lock lock(mu_);
  flush_requested_ = true;
  cv_.notify_all();
  const bool done = done_cv_.wait_for(lock, timeout,
                                      [&] { return stop_ || (queue_.empty() && in_flight_ == 0); });
  flush_requested_ = false;
  return done && queue_.empty() && in_flight_ == 0;
}

int64_t MetricsStreamer::acknowledged() const {
  std::lock_guard lock(mu_);
  return acknowledged_;
}

int64_t MetricsStreamer::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void MetricsStreamer::loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<StepRecord> unacked;  // taken from the queue, not yet acknowledged
  std::size_t written = 0;          // how many of them went out on the open stream
  std::unique_ptr<MetricsStream> stream;
  Clock::time_point opened{};
  Millis backoff{0};
  bool warned = false;
  std::unique_lock lock(mu_);
  for (;;) {
    const Millis wait = backoff.count() > 0 ? backoff : options_.flush_interval;
    cv_.wait_for(lock, wait, [&] {
      return stop_ ||
             (flush_requested_ && backoff.count() == 0 && (!queue_.empty() || !unacked.empty()));
    });
    if (stop_) break;
    while (!queue_.empty()) {
      unacked.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    in_flight_ = unacked.size();
    const bool flush = flush_requested_;
    if (unacked.empty()) {
      done_cv_.notify_all();
      continue;
    }
    lock.unlock();
    int64_t acked = 0;
    try {
      if (!stream) {
        std::unique_ptr<MetricsStream> s =
            client_.open_metrics_stream(options_.rotate + options_.call_deadline);
        std::lock_guard g(mu_);
        if (stop_) break;  // (holding no lock after the loop)
        stream = std::move(s);
        stream_ = stream.get();
        opened = Clock::now();
        written = 0;
      }
      const bool ok = stream->write(unacked, written);
      if (ok) written = unacked.size();
      if (!ok || flush || Clock::now() - opened >= options_.rotate) {
        // stream_ still points to it while finish() waits, so stop() can cancel it.
        acked = std::clamp<int64_t>(stream->finish(), 0, static_cast<int64_t>(unacked.size()));
        written = 0;
        std::lock_guard g(mu_);
        stream.reset();
        stream_ = nullptr;
      }
      if (warned) spdlog::info("metrics stream restored");
      warned = false;
      backoff = Millis(0);
    } catch (const CoordinatorError& e) {
      {
        std::lock_guard g(mu_);
        stream.reset();
        stream_ = nullptr;
        if (stop_) break;
      }
      written = 0;
      if (!warned) spdlog::warn("{} ({} records kept, retrying)", e.what(), unacked.size());
      warned = true;
      backoff = std::min(Millis(1000), std::max(Millis(100), backoff * 2));
    }
    unacked.erase(unacked.begin(), unacked.begin() + acked);
    lock.lock();
    acknowledged_ += acked;
    in_flight_ = unacked.size();
    if (queue_.empty() && in_flight_ == 0) done_cv_.notify_all();
  }
  // Leaving: stop() cancels an open stream; nothing more is sent.
  if (lock.owns_lock()) lock.unlock();
  std::lock_guard g(mu_);
  stream_ = nullptr;
}

}  // namespace mddp::worker
