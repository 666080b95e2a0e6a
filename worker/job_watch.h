// JobWatch: the worker's end of the Watch stream (proto: Watch).
//
// A background thread holds one Watch call open from right after Join until
// this object is destroyed, which must come after Leave: a stream that ends
// before its rank left tells the coordinator the worker's process may be
// gone (Note [Who is at fault] in coordinator/health.cc). The coordinator
// pushes the job's verdict on it the moment the job fails, or this rank's
// attempt ends (RESTARTING); `on_failure` gets it, so this rank hears of a
// death elsewhere within milliseconds instead of at its next heartbeat. A stream that breaks while
// the job runs (connection reset, coordinator restarting) is reopened at once, then with a backoff
// up to 1 s; whether the coordinator itself is lost is the heartbeat's to judge
// (worker/heartbeat.h), not this stream's.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "control/job_status.h"
#include "worker/coordinator_client.h"

namespace mddp::worker {

class JobWatch {
 public:
  using OnFailure = std::function<void(const control::JobStatus& failed)>;
  // Starts the thread; the client must hold the session (after join()).
  JobWatch(CoordinatorClient& client, OnFailure on_failure);
  ~JobWatch();  // closes the stream and joins the thread
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

 private:
  void loop();

  CoordinatorClient& client_;
  const OnFailure on_failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  WatchStream* stream_ = nullptr;  // the open call (cancelled by the destructor)
  std::thread thread_;
};

}  // namespace mddp::worker
