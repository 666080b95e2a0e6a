#include "core/ddp/bucket_assignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/common/check.h"
#include "core/ddp/grad_sync.h"

namespace mddp::ddp {
namespace {

std::vector<std::size_t> flatten(const std::vector<std::vector<std::size_t>>& buckets) {
  std::vector<std::size_t> all;
  for (const auto& b : buckets) all.insert(all.end(), b.begin(), b.end());
  return all;
}

// The small FullMLP(128, 16): 16 x (128x128 weight, 128 bias) + (2x128, 2).
std::vector<std::size_t> small_mlp_bytes() {
  std::vector<std::size_t> b;
  for (int i = 0; i < 16; ++i) {
    b.push_back(128 * 128 * 4);
    b.push_back(128 * 4);
  }
  b.push_back(2 * 128 * 4);
  b.push_back(2 * 4);
  return b;
}

// Every parameter lands in exactly one bucket, in reverse registration order.
TEST(BucketAssignment, ReverseOrderCoversEveryParameterOnce) {
  const auto bytes = small_mlp_bytes();
  for (std::size_t cap : {std::size_t{1}, std::size_t{100'000}, std::size_t{25} << 20}) {
    const auto buckets = assign_buckets(bytes, cap, cap);
    std::vector<std::size_t> expected(bytes.size());
    std::iota(expected.rbegin(), expected.rend(), 0);
    EXPECT_EQ(flatten(buckets), expected) << "cap " << cap;
  }
}

// 25 MB (the default cap) holds the whole 1.06 MB small MLP in one bucket;
// a 1-byte cap gives every parameter its own bucket.
TEST(BucketAssignment, CapsDecideTheBucketCount) {
  const auto bytes = small_mlp_bytes();
  EXPECT_EQ(assign_buckets(bytes, 25u << 20, 25u << 20).size(), 1u);
  EXPECT_EQ(assign_buckets(bytes, 1, 1).size(), bytes.size());
}

// No bucket exceeds its cap unless it holds a single oversized parameter;
// and a bucket is only closed when the next parameter would not fit.
TEST(BucketAssignment, RespectsCapsAndFillsGreedily) {
  const std::vector<std::size_t> bytes = {300, 50, 700, 100, 100, 900, 10, 20};
  const std::size_t first = 150, cap = 1000;
  const auto buckets = assign_buckets(bytes, first, cap);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    std::size_t sum = 0;
    for (std::size_t p : buckets[i]) sum += bytes[p];
    const std::size_t c = i == 0 ? first : cap;
    if (buckets[i].size() > 1) {
      EXPECT_LE(sum, c) << "bucket " << i;
    }
    if (i + 1 < buckets.size()) {
      EXPECT_GT(sum + bytes[buckets[i + 1].front()], c) << "bucket " << i << " closed early";
    }
  }
  // Hand-computed: reverse order 20,10,900 | ... first cap 150 -> {7,6} then 900+100 = 1000 fits ->
  // {5,4}, ...
  ASSERT_GE(buckets.size(), 2u);
  EXPECT_EQ(buckets[0], (std::vector<std::size_t>{7, 6}));
  EXPECT_EQ(buckets[1], (std::vector<std::size_t>{5, 4}));
}

// The first bucket is small so communication starts early; later ones use the big cap.
TEST(BucketAssignment, SmallFirstBucket) {
  const std::vector<std::size_t> bytes(10, 100);
  const auto buckets = assign_buckets(bytes, 200, 500);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].size(), 2u);
  EXPECT_EQ(buckets[1].size(), 5u);
  EXPECT_EQ(buckets[2].size(), 3u);
}

TEST(BucketAssignment, EmptyModel) {
  EXPECT_TRUE(assign_buckets({}, 10, 10).empty());
}

// The cap flags in bytes: a fraction of a MiB, a huge value held at 1 TiB
// (not an overflowing conversion), and no cap that is not positive.
TEST(BucketAssignment, CapBytesFromMiB) {
  EXPECT_EQ(bucket_cap_bytes(25, "--bucket-mb"), std::size_t{25} << 20);
  EXPECT_EQ(bucket_cap_bytes(0.5, "--bucket-mb"), std::size_t{1} << 19);
  EXPECT_EQ(bucket_cap_bytes(1e300, "--bucket-mb"), std::size_t{1} << 40);
  for (double bad : {0.0, -1.0, std::nan("")}) {
    try {
      bucket_cap_bytes(bad, "--first-bucket-mb");
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--first-bucket-mb"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mddp::ddp
