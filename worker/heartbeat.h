// Heartbeat: the worker's link to the job's health.
//
// A background thread sends a heartbeat every interval carrying this rank's
// progress (step, phase, the collective entered and completed last) and,
// once set, what the rank runs on (Resources), and reads the job state that
// rides back. This rank stops (StopReason) when
//  * the coordinator says FAILED (another rank died, left with an error or
//    built another model): its verdict's line names the rank at fault;
//  * the coordinator says RESTARTING: this rank's attempt ended (a rank
//    died and restarts remain); the process exits to join the next one;
//  * the coordinator stays unreachable longer than the heartbeat timeout
//    (the same bound it applies to us), or no longer knows our session;
//  * the worker fails it locally (fail_locally, e.g. on SIGINT).
// Stopping aborts the attached ProcessGroup (CPU or NCCL), so the training
// thread's wait throws at once instead of hanging on a peer that will never
// answer, and stopping() turns true (the training loop checks it between
// phases).
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/comm/communicator.h"
#include "worker/coordinator_client.h"

namespace mddp::worker {

// Where this rank is: written by the training thread (cheap, lock-free),
// read by the heartbeat thread.
class ProgressBoard {
 public:
  // `phase` must be a string literal (stored as a pointer).
  void set(int64_t step, const char* phase) {
    step_.store(step, std::memory_order_relaxed);
    phase_.store(phase, std::memory_order_relaxed);
  }
  void set_total_steps(int64_t total) { total_steps_.store(total, std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  const char* phase() const { return phase_.load(std::memory_order_relaxed); }
  int64_t total_steps() const { return total_steps_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> total_steps_{0};
  std::atomic<const char*> phase_{"setup"};
};

// The offset between this host's steady clock and the coordinator's wall
// clock, from heartbeat round trips (Cristian's algorithm): the coordinator
// stamped its clock somewhere inside the round trip, so assuming the middle
// is off by at most half the round trip. Of the last kWindow samples the one
// with the shortest round trip is the most exact; the window lets the
// estimate follow slow drift. Written by the heartbeat thread, read by the
// training thread.
class ClockOffset {
 public:
  static constexpr int kWindow = 8;
  void add(const HeartbeatInfo::ClockSample& s);
  int64_t offset_ns() const { return offset_.load(std::memory_order_relaxed); }

 private:
  HeartbeatInfo::ClockSample window_[kWindow];
  int count_ = 0;
  std::atomic<int64_t> offset_{0};
};

// Why this rank stops: the coordinator's word, the job's status (FAILED,
// or RESTARTING: this rank's attempt ended and it joins the next; with the
// verdict), or this rank's own (the coordinator lost, an interruption:
// FAILED, with no verdict).
struct StopReason {
  control::JobStatus status;
  std::string message;            // the one line this rank reports and leaves with
  bool coordinator_lost = false;  // the coordinator is gone: don't wait on it to leave
  bool restart() const { return status.state == control::State::kRestarting; }
};

class Heartbeat {
 public:
  struct Options {
    Millis interval{1000};
    Millis timeout{10000};  // unreachable longer than this: give up
  };
  Heartbeat(CoordinatorClient& client, const ProgressBoard& board, Options options);
  ~Heartbeat();  // stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void start();
  void stop();  // idempotent; joins the thread
  // The communicator to abort on failure (nullptr: none). Aborts at once
  // when the job has already failed. Detach before destroying it.
  void attach(comm::ProcessGroup* comm);
  // The same for the data plane's set-up, before there is a communicator.
  void attach(comm::AbortSignal* setup);

  bool stopping() const { return stopping_.load(); }
  std::optional<StopReason> stop_reason() const;
  // Blocks until a reason to stop is known or `timeout` passed.
  std::optional<StopReason> wait_stop_reason(Millis timeout) const;
  // Gives up locally (the first reason wins), e.g. on SIGINT.
  void fail_locally(const std::string& message);
  // The coordinator's word learned elsewhere than in a heartbeat (the Watch
  // stream, a reply to Leave or ReportPeerFault): stops when the job FAILED,
  // or RESTARTING (this rank's attempt ended); the first reason wins.
  void heard(const control::JobStatus& status);
  // What this rank runs on (the device it resolved, its compute threads,
  // the CPUs it may use): sent at once, then with every heartbeat.
  void set_resources(control::Resources resources);
  // This host's steady clock + clock_offset_ns() = the coordinator's Unix ns
  // (0 until the first heartbeat was answered). See ClockOffset.
  int64_t clock_offset_ns() const { return clock_.offset_ns(); }

 private:
  void loop();
  void stop_for(StopReason reason);
  ClockOffset clock_;
  control::Progress progress() const;

  CoordinatorClient& client_;
  const ProgressBoard& board_;
  const Options options_;
  std::thread thread_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  bool send_now_ = false;  // set_resources: beat without waiting for the interval
  std::atomic<bool> stopping_{false};
  std::optional<StopReason> reason_;
  comm::ProcessGroup* comm_ = nullptr;
  comm::AbortSignal* setup_ = nullptr;
  std::optional<control::Resources> resources_;
};

// Detaches what it attached (a communicator, or the set-up's abort signal)
// on scope exit (declare after what owns it).
template <typename T>
class Attached {
 public:
  Attached(Heartbeat& hb, T* what) : hb_(hb) { hb_.attach(what); }
  ~Attached() { hb_.attach(static_cast<T*>(nullptr)); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  Heartbeat& hb_;
};
using AttachedComm = Attached<comm::ProcessGroup>;

}  // namespace mddp::worker
