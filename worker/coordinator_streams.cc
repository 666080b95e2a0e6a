#include "worker/coordinator_streams.h"

#include "control/limits.h"
#include "control/wire.h"
#include "worker/grpc_call.h"

namespace mddp::worker {
namespace {

class GrpcMetricsStream final : public MetricsStream {
 public:
  GrpcMetricsStream(v1::Coordinator::Stub& stub, const std::string& session, int attempt,
                    const std::string& address, Millis deadline)
      : stub_(stub), session_(session), attempt_(attempt), address_(address), deadline_(deadline) {
    prepare(ctx_, deadline);
  }
  bool write(const std::vector<StepRecord>& records, std::size_t from) override {
    constexpr int kPerBatch = 256;  // records per message (each well under 1 KiB)
    static_assert(static_cast<std::size_t>(kPerBatch) <= control::kMaxMetricsBatch);
    // Started here, not in the constructor: starting blocks until the channel
    // is ready, and the owner must be able to cancel() that wait.
    if (!writer_) writer_ = stub_.StreamMetrics(&ctx_, &ack_);
    v1::MetricsBatch batch;
    for (std::size_t i = from; i < records.size(); ++i) {
      control::to_proto(records[i].metrics, records[i].time_unix_ns, batch.add_steps());
      if (batch.steps_size() == kPerBatch || i + 1 == records.size()) {
        batch.set_session(session_);
        batch.set_attempt(attempt_);
        if (!writer_->Write(batch)) return false;
        batch.Clear();
      }
    }
    return true;
  }
  int64_t finish() override {
    if (!writer_) return 0;
    writer_->WritesDone();
    const grpc::Status s = writer_->Finish();
    if (!s.ok()) throw call_error("metrics stream", address_, s, deadline_);
    return ack_.count();
  }
  void cancel() override { ctx_.TryCancel(); }

 private:
  v1::Coordinator::Stub& stub_;
  const std::string session_;
  const int attempt_;
  const std::string address_;
  const Millis deadline_;
  grpc::ClientContext ctx_;
  v1::MetricsAck ack_;
  std::unique_ptr<grpc::ClientWriter<v1::MetricsBatch>> writer_;
};

class GrpcWatchStream final : public WatchStream {
 public:
  GrpcWatchStream(v1::Coordinator::Stub& stub, const std::string& session,
                  const std::string& address)
      : stub_(stub), address_(address) {
    req_.set_session(session);
    ctx_.set_wait_for_ready(true);  // no deadline: it lives as long as the job
  }
  bool next(control::JobStatus& status) override {
    // Started here, not in the constructor: starting blocks until the
    // channel is ready, and the owner must be able to cancel() that wait.
    if (!reader_) reader_ = stub_.Watch(&ctx_, req_);
    v1::JobEvent event;
    if (!reader_->Read(&event)) return false;
    status.state = control::from_proto(event.state());
    status.verdict = control::from_proto(event.verdict());
    return true;
  }
  void finish() override {
    const grpc::Status s = reader_ ? reader_->Finish() : grpc::Status::CANCELLED;
    if (!s.ok()) throw call_error("watch", address_, s, Millis(0));
  }
  void cancel() override { ctx_.TryCancel(); }

 private:
  v1::Coordinator::Stub& stub_;
  const std::string address_;
  v1::WatchRequest req_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader_;
};

}  // namespace

std::unique_ptr<MetricsStream> grpc_metrics_stream(v1::Coordinator::Stub& stub,
                                                   const std::string& session, int attempt,
                                                   const std::string& address, Millis deadline) {
  return std::make_unique<GrpcMetricsStream>(stub, session, attempt, address, deadline);
}

std::unique_ptr<WatchStream> grpc_watch_stream(v1::Coordinator::Stub& stub,
                                               const std::string& session,
                                               const std::string& address) {
  return std::make_unique<GrpcWatchStream>(stub, session, address);
}

}  // namespace mddp::worker
