// The IDX dataset reader (core/data/idx_reader.h) on a hostile file: plain
// or gzip, any magic, any dimensions. A refusal is an InputError naming the
// file; anything else (a crash, a huge allocation, an internal check) is a
// finding. What it returns has exactly the bytes its dimensions say.
#include "core/data/idx_reader.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::InputFile file(data, size);
  fuzz::refusals_allowed([&] {
    const data::IdxArray a = data::read_idx(file.path());
    int64_t n = 1;
    for (int64_t d : a.dims) n *= d;
    MDDP_FUZZ_ASSERT(static_cast<int64_t>(a.data.size()) == n);
  });
  fuzz::refusals_allowed([&] {
    const data::IdxImages im = data::read_idx_images(file.path());
    MDDP_FUZZ_ASSERT(static_cast<int64_t>(im.pixels.size()) == im.count * im.rows * im.cols);
  });
  fuzz::refusals_allowed([&] {
    for (uint8_t label : data::read_idx_labels(file.path(), 10).labels)
      MDDP_FUZZ_ASSERT(label < 10);
  });
  return 0;
}
