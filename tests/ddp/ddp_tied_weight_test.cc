// The GPT's tied weight (Note [Tied weight] in core/nn/gpt.h) is DDP's
// classic trap: transformer.wte.weight gets its head's gradient first and
// its embedding's last, its hook fires after each, and the bucket holding
// it must not be all-reduced before both are in. The reducer counts
// contributions (Note [Contributions]); here its flush rule is wrapped so
// that, on each rank, the tied weight's gradient is recorded at the very
// moment its bucket is launched, and compared with the rank's final local
// gradient (from a replica without DDP). A reducer that counted hook
// firings instead would launch it with the head's share only.
#include <gtest/gtest.h>

#include "core/comm/communicator.h"
#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/ddp/strategies.h"
#include "core/train/distributed.h"
#include "ddp/ddp_fixture.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

// What the wrapped flush rule sees, per rank (ranks are threads).
struct LaunchRecord {
  const nn::Parameter* tied = nullptr;
  std::size_t tied_bucket = 0;
  std::vector<float> at_first_launch, at_tied_launch;
  std::vector<std::size_t> order;  // buckets in launch order
};
thread_local LaunchRecord t_record;

// flush_in_order, recording the tied gradient as buckets are launched.
std::size_t recording_flush(const std::vector<std::size_t>& pending, std::size_t next,
                            const std::function<void(std::size_t)>& launch) {
  return ddp::flush_in_order(pending, next, [&](std::size_t b) {
    if (t_record.order.empty()) t_record.at_first_launch = t_record.tied->grad.to_vector();
    if (b == t_record.tied_bucket) t_record.at_tied_launch = t_record.tied->grad.to_vector();
    t_record.order.push_back(b);
    launch(b);
  });
}

TEST(DdpTiedWeight, ItsBucketIsLaunchedOnlyWithBothContributions) {
  for (double bucket_mb : {25.0, 0.000001}) {  // one bucket for all; one per parameter
    SCOPED_TRACE(str("bucket cap ", bucket_mb, " MB"));
    const train::TrainConfig cfg = ddp_config("gpt", "bucketed", bucket_mb);
    constexpr int kWorld = 2;
    comm::MemoryStore store;
    run_threads(
        kWorld,
        [&](int rank) {
          // This rank's own final gradient, from a replica with no DDP at all.
          std::vector<float> local;
          train::Trainer plain(cfg, rank, kWorld);
          train::StepHooks capture;
          capture.after_backward = [&] { local = plain.model().parameters()[0]->grad.to_vector(); };
          plain.step(capture);

          auto transport =
              comm::connect_transport(store, rank, kWorld, {"tied", 0, ""},
                                      comm::TransportKind::kTcp, std::chrono::seconds(20));
          comm::Communicator comm(std::move(transport), train::comm_options(cfg));
          train::Trainer t(cfg, rank, kWorld);
          const auto params = t.model().parameters();
          ASSERT_EQ(params[0]->name, "transformer.wte.weight");
          const ddp::SyncOptions options{.bucket_mb = bucket_mb, .first_bucket_mb = bucket_mb};
          auto sync = ddp::make_bucketed_sync(options, params, comm,
                                              {ddp::assign_buckets, recording_flush});
          const auto& buckets = dynamic_cast<ddp::Reducer&>(*sync).buckets();
          t_record = {};
          t_record.tied = params[0];
          for (std::size_t b = 0; b < buckets.size(); ++b)
            for (std::size_t i : buckets[b])
              if (i == 0) t_record.tied_bucket = b;
          t.model().set_grad_ready_hook([&](nn::Parameter& p) { sync->on_grad_ready(p); });
          train::StepHooks hooks;
          hooks.after_backward = [&] { sync->finish(); };
          t.step(hooks);

          ASSERT_EQ(t_record.order.size(), buckets.size());
          EXPECT_EQ(t_record.order.back(), t_record.tied_bucket) << "the tied weight fires last";
          EXPECT_EQ(t_record.at_tied_launch, local)
              << "rank " << rank
              << ": the tied weight's bucket went out without its whole gradient";
          // Not vacuous: the first bucket leaves while only the head's share is in,
          // and that share alone differs from the whole.
          if (buckets.size() > 1) {
            EXPECT_NE(t_record.at_first_launch, local);
          }
        },
        std::chrono::seconds(60));
  }
}

}  // namespace
}  // namespace mddp::test
