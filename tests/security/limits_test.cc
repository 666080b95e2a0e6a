// The size limits a hostile or broken peer hits (docs/security.md, Limits),
// each refused with its own clear status while the job goes on: the gRPC
// message size, the key/value store's value size and key count, the metrics
// batch (records, and bucket spans per record). Over real gRPC where the
// refusal happens there; the store's key count on the class itself (131,072
// Set calls over gRPC would only make the test slow).
#include "control/limits.h"

#include <gtest/gtest.h>

#include "coordinator/coordinator.h"
#include "coordinator/kv_store.h"
#include "service/client.h"
#include "support/text.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

using mddp::test::contains;

// A coordinator of one rank, joined by a test client.
class LimitsTest : public ::testing::Test {
 protected:
  LimitsTest() : coordinator_(options()), client_(coordinator_.address()) {
    EXPECT_TRUE(client_.join("h").ok());
  }
  static CoordinatorOptions options() {
    CoordinatorOptions o;
    o.port = 0;
    o.job.job_id = "job";
    o.job.token = "tok";
    o.job.heartbeat_timeout = 60s;
    return o;
  }
  // One StreamMetrics call carrying one batch of `records` records with
  // `buckets` spans each; the call's status and the records acknowledged.
  std::pair<grpc::Status, int64_t> stream(std::size_t records, std::size_t buckets) {
    v1::MetricsBatch batch;
    batch.set_session(client_.session());
    for (std::size_t s = 0; s < records; ++s) {
      auto* m = batch.add_steps();
      m->set_step(static_cast<int64_t>(s + 1));
      for (std::size_t b = 0; b < buckets; ++b)
        m->add_buckets()->set_index(static_cast<int32_t>(b));
    }
    auto stub = v1::Coordinator::NewStub(
        grpc::CreateChannel(coordinator_.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + test::kCallDeadline);
    v1::MetricsAck ack;
    auto writer = stub->StreamMetrics(&ctx, &ack);
    writer->Write(batch);
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    return {s, ack.count()};
  }
  // The job still runs and answers this rank.
  bool alive() {
    v1::HeartbeatReply reply;
    return client_.heartbeat(&reply).ok() && reply.state() == v1::JOB_STATE_RUNNING;
  }
  grpc::Status set(const std::string& key, const std::string& value) {
    return client_.set(key, value);
  }

  Coordinator coordinator_;
  test::TestClient client_;
};

TEST_F(LimitsTest, AMessageOverTheGrpcLimitIsRefusedBeforeItIsRead) {
  const grpc::Status s = set("big", std::string(kMaxMessageBytes + 1, 'x'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_TRUE(contains(s.error_message(), "larger than max")) << s.error_message();
  EXPECT_TRUE(alive());
}

TEST_F(LimitsTest, ASetValueOverOneMebibyteIsRefusedNamingTheLimit) {
  const KvStore::Limits limits;
  EXPECT_TRUE(set("ok", std::string(limits.max_value_bytes, 'x')).ok());
  const grpc::Status s = set("too-big", std::string(limits.max_value_bytes + 1, 'x'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "value of key 'too-big' has 1048577 bytes (at most 1048576)");
  const grpc::Status k = set(std::string(limits.max_key_bytes + 1, 'k'), "v");
  EXPECT_EQ(k.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(contains(k.error_message(), "(at most 512)")) << k.error_message();
  EXPECT_TRUE(alive());
}

TEST(KvStoreLimits, TheKeyCountIsBoundedAndOverwritesStillWork) {
  KvStore kv(KvStore::Limits{.max_keys = 3});
  for (const char* k : {"a", "b", "c"}) EXPECT_TRUE(kv.set(k, "v").ok());
  const Outcome o = kv.set("d", "v");
  EXPECT_EQ(o.code, Code::kResourceExhausted);
  EXPECT_EQ(o.message, "the store is full (3 keys): refusing key 'd'");
  EXPECT_TRUE(kv.set("a", "new value").ok()) << "overwriting an existing key adds no key";
  EXPECT_EQ(kv.size(), 3u);
  EXPECT_EQ(KvStore::Limits{}.max_keys, std::size_t{1} << 17);
}

TEST_F(LimitsTest, AMetricsBatchOverTheLimitIsRefusedAndNothingOfItLogged) {
  auto [ok, count] = stream(kMaxMetricsBatch, 1);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(count, static_cast<int64_t>(kMaxMetricsBatch));
  const uint64_t logged = coordinator_.job().metrics_log().count();
  auto [refused, none] = stream(kMaxMetricsBatch + 1, 1);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(),
            "a metrics batch of 4097 records (at most 4096 in one message)");
  EXPECT_EQ(coordinator_.job().metrics_log().count(), logged);
  EXPECT_TRUE(alive());
}

TEST_F(LimitsTest, AMetricsRecordWithTooManyBucketSpansIsRefused) {
  auto [refused, none] = stream(1, kMaxBucketsPerRecord + 1);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(),
            "a metrics record of step 1 with 65537 bucket spans (at most 65536)");
  EXPECT_EQ(coordinator_.job().metrics_log().count(), 0u);
  EXPECT_TRUE(alive());
}

}  // namespace
}  // namespace mddp::coordinator
