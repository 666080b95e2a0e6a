// The diagnosis Labs' planting and sealing (labs/support/diagnosis.h): every
// planted fault is one the job's seam accepts (core/train/lab_fault.h), in
// the ranges the Labs promise; a sealed fault reads back whole; a damaged
// seal is an InputError, a missing one none.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/common/check.h"
#include "core/train/lab_fault.h"
#include "labs/support/diagnosis.h"
#include "support/files.h"

namespace mddp::labs {
namespace {

using train::LabFault;

TEST(DiagnosisPlant, EveryPlantedFaultIsOneTheJobAcceptsInItsRange) {
  for (const std::string& lab : diagnosis_labs()) {
    std::set<int> ranks;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      const PlantedFault f = plant_fault(lab, seed);
      ranks.insert(f.rank);
      const LabFault seam = LabFault::parse(f.environment());
      EXPECT_EQ(seam.rank, f.rank) << lab << " " << f.environment();
      if (lab == "hang") {
        EXPECT_EQ(seam.kind, LabFault::Kind::kHang);
        EXPECT_TRUE(f.step >= 20 && f.step <= 200) << f.step;
      } else if (lab == "straggler") {
        EXPECT_EQ(seam.kind, LabFault::Kind::kSlow);
        EXPECT_TRUE(f.ms >= 2 && f.ms <= 5) << f.ms;
      } else if (lab == "poisoned_shard") {
        EXPECT_EQ(seam.kind, LabFault::Kind::kNan);
        EXPECT_TRUE(f.step >= 10 && f.step <= 50) << f.step;
      } else if (lab == "mismatched_rank") {
        EXPECT_EQ(seam.kind, LabFault::Kind::kMismatch);
      } else if (lab == "slow_link") {
        EXPECT_EQ(seam.kind, LabFault::Kind::kLink);
        // Ring neighbours, so the ring all-reduce uses the link.
        EXPECT_EQ(seam.peer, (f.rank + 1) % 4);
        EXPECT_TRUE(f.mbps >= 15 && f.mbps <= 40) << f.mbps;
        comm::CommOptions ends[2], elsewhere;
        seam.adjust_comm(f.rank, 4, ends[0]);
        seam.adjust_comm(f.peer, 4, ends[1]);
        seam.adjust_comm((f.rank + 2) % 4, 4, elsewhere);
        EXPECT_EQ(ends[0].slow_peer, f.peer);
        EXPECT_EQ(ends[1].slow_peer, f.rank);
        EXPECT_EQ(ends[0].slow_peer_bytes_per_second, f.mbps * 1e6);
        EXPECT_EQ(elsewhere.slow_peer, -1) << "a rank off the link paces nothing";
      } else {
        EXPECT_EQ(seam.kind, LabFault::Kind::kShort);
        // Not a step whose loss every rank all-reduces anyway (a log line
        // every 20, an epoch's end at 128): there the ranks would still agree.
        EXPECT_NE(f.step % 20, 0) << f.step;
        EXPECT_NE(f.step % 128, 0) << f.step;
      }
    }
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << lab << ": every rank is drawn, rank 0 too";
  }
}

TEST(DiagnosisSeal, ASealedFaultReadsBackWholeAndADamagedOneIsRefused) {
  const test::TempDir dir;
  EXPECT_FALSE(unseal_fault(dir.path()).has_value());
  for (const char* lab : {"mismatched_rank", "slow_link"}) {
    const PlantedFault f = plant_fault(lab, 7);
    seal_fault(f, dir.path());
    const auto back = unseal_fault(dir.path());
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->environment(), f.environment());
    EXPECT_EQ(back->lab, f.lab);
  }
  const PlantedFault f = plant_fault("mismatched_rank", 7);
  seal_fault(f, dir.path());
  std::ifstream in(sealed_fault_path(dir.path()));
  const std::string sealed((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(sealed.find("mismatch"), std::string::npos) << "the answer is readable: " << sealed;
  const auto back = unseal_fault(dir.path());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->environment(), f.environment());
  EXPECT_EQ(back->lab, f.lab);
  std::ofstream(sealed_fault_path(dir.path())) << "0g1\n";
  EXPECT_THROW(unseal_fault(dir.path()), InputError);
}

}  // namespace
}  // namespace mddp::labs
