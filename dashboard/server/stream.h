// The /api/stream feed. Every 250 ms (the page redraws at most 4 times a
// second; polling more often only wakes every client, and the training
// ranks' cores, more often for nothing), on the io thread, it reads the records
// the metrics log gained since the last poll (MetricsLog::since), folds them
// into the Tracker and pushes them to every WebSocket client as one
// "metrics" frame (serialised once for all); every second, and at once when
// the job's state changes, a "job" frame. A client that joins first gets a
// job frame and the recent tail (the last 500 steps' records, at most 2 MiB,
// the newest kept), then the live frames, with no record missed or repeated.
//
// Sending never blocks: each client has its own bounded queue (ws_session.h).
// io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/job.h"
#include "dashboard/server/tracker.h"

namespace mddp::dashboard {

class WsSession;

class Stream {
 public:
  static constexpr std::chrono::milliseconds kPollPeriod{250};
  static constexpr std::chrono::milliseconds kJobPeriod{1000};
  static constexpr std::size_t kRecordsPerFrame = 1000;
  static constexpr int64_t kCatchUpSteps = 500;
  static constexpr std::size_t kCatchUpBytes = 2 << 20;

  Stream(boost::asio::io_context& ioc, const coordinator::Job& job, Tracker& tracker);

  void start();  // the first poll, then every kPollPeriod
  void stop();   // no more polls
  // Folds in and broadcasts the records that arrived since the last call,
  // and the job frame when it is due (what each poll does).
  void drain();
  // Sends `client` the job frame and the catch-up, then includes it in the broadcasts.
  void join(const std::shared_ptr<WsSession>& client);

 private:
  void poll();
  void broadcast(const std::shared_ptr<const std::string>& frame);
  // Frames of at most kRecordsPerFrame records.
  static std::vector<std::shared_ptr<const std::string>> frames(
      const std::vector<std::string>& records);

  boost::asio::steady_timer timer_;
  const coordinator::Job& job_;
  Tracker& tracker_;
  std::vector<std::weak_ptr<WsSession>> clients_;
  uint64_t last_seq_ = 0;  // every record up to here was polled and broadcast
  control::State last_state_ = control::State::kForming;
  coordinator::TimePoint next_job_frame_{};
  bool stopped_ = false;
};

}  // namespace mddp::dashboard
