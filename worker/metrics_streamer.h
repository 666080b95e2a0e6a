// MetricsStreamer: per-step timings to the coordinator, off the training
// thread.
//
// push() only appends to a bounded in-memory queue (when queued plus
// unacknowledged records reach the capacity, the oldest queued one is
// dropped and counted; it never blocks the step). A
// background thread wakes every flush interval and writes what was queued
// as one batch on an open StreamMetrics call (the coordinator appends each
// batch as it arrives, so the dashboard is at most an interval behind).
// The coordinator acknowledges a stream only when it closes, so the stream
// is closed and reopened every `rotate` interval (and on flush()); records
// leave the unacknowledged list only when the ack counts them. When a
// stream breaks (coordinator restarting, network down) the unacknowledged
// records are sent again on a new stream after a short backoff, so a brief
// outage delays metrics but loses none. Delivery is at-least-once: a stream
// that broke after the coordinator appended part of it makes those records
// appear twice. A stream's deadline exceeds the heartbeat timeout, so a
// pause shorter than that (SIGSTOP of the coordinator) never breaks one.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/coordinator_client.h"

namespace mddp::worker {

class MetricsStreamer {
 public:
  struct Options {
    Millis flush_interval{250};
    Millis rotate{2000};             // close (get the ack) and reopen a stream this often
    std::size_t capacity = 100'000;  // queued + unacknowledged records at most
    Millis call_deadline{30'000};    // a stream's deadline beyond `rotate`
  };
  MetricsStreamer(CoordinatorClient& client, Options options);
  ~MetricsStreamer();  // stop()
  MetricsStreamer(const MetricsStreamer&) = delete;
  MetricsStreamer& operator=(const MetricsStreamer&) = delete;

  void start();
  // Never blocks on the network.
  void push(const perf::StepMetrics& m);
  // Sends everything pushed so far; true when all of it was acknowledged
  // within `timeout`.
  bool flush(Millis timeout);
  // Stops the thread; what is unsent stays unsent.
  void stop();

  int64_t acknowledged() const;
  int64_t dropped() const;

 private:
  void loop();

  CoordinatorClient& client_;
  const Options options_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the sender
  std::condition_variable done_cv_;  // wakes flush()
  std::deque<StepRecord> queue_;     // pushed, not yet taken by the sender
  std::size_t in_flight_ = 0;        // taken by the sender, not yet acknowledged
  MetricsStream* stream_ = nullptr;  // the open stream (cancelled by stop())
  bool stop_ = false, flush_requested_ = false;
  int64_t acknowledged_ = 0, dropped_ = 0;
};

}  // namespace mddp::worker
