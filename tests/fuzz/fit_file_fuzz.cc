// The α-β fit file (core/perf/cost_model.h) that `microddp analyze --fits`
// and `microddp model --fit` read: written by `bench allreduce --fit`, but
// a file anyone can edit or damage. A refusal is an InputError naming the
// file; what loads must predict a finite, non-negative all-reduce time for
// every world it fits, at any message size.
#include <cmath>

#include "core/perf/cost_model.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::InputFile file(data, size);
  fuzz::refusals_allowed([&] {
    for (const perf::LinkFit& f : perf::load_fits(file.path())) {
      MDDP_FUZZ_ASSERT(f.world_size >= 1);
      for (const double bytes : {0.0, 4096.0, 1e9}) {
        const double s = perf::allreduce_seconds(f.algorithm, bytes, f.world_size, f.link);
        MDDP_FUZZ_ASSERT(std::isfinite(s) && s >= 0);
      }
    }
  });
  return 0;
}
