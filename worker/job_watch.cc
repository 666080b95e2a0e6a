#include "worker/job_watch.h"

#include <grpcpp/support/status_code_enum.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace mddp::worker {

JobWatch::JobWatch(CoordinatorClient& client, OnFailure on_failure)
    : client_(client), on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] { loop(); });
}

JobWatch::~JobWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (stream_) stream_->cancel();
  }
  cv_.notify_all();
  thread_.join();
}

void JobWatch::loop() {
  Millis backoff{0};
  bool failed = false;  // the verdict was handed on
  for (;;) {
    std::unique_ptr<WatchStream> stream = client_.open_watch();
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stream_ = stream.get();
    }
    control::JobStatus status;
    bool over = false;  // the job ended: the coordinator closes the stream next
    while (stream->next(status)) {
      backoff = Millis(0);
      const bool restarting = status.state == control::State::kRestarting;
      over = over || status.terminal() || restarting;  // RESTARTING: this rank's attempt is over
      if ((status.state == control::State::kFailed || restarting) && !failed) {
        failed = true;
        on_failure_(status);
      }
    }
    bool again = !over;
    try {
      stream->finish();
    } catch (const CoordinatorError& e) {
      // An unknown session will not become known, nor an older coordinator
      // learn Watch: the heartbeat carries on alone.
      again = again && e.code() != static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) &&
              e.code() != static_cast<int>(grpc::StatusCode::UNIMPLEMENTED);
      spdlog::debug("{}", e.what());
    }
    std::unique_lock lock(mu_);
    stream_ = nullptr;
    if (stop_ || !again) return;
    // At once the first time (a dropped connection comes back before the
    // coordinator's grace ends), then slower while it stays away.
    cv_.wait_for(lock, backoff, [&] { return stop_; });
    if (stop_) return;
    backoff = std::clamp(backoff * 2, Millis(100), Millis(1000));
  }
}

}  // namespace mddp::worker
