// The safetensors checkpoint reader (core/train/safetensors.h) on a hostile
// file: any header length, any JSON, any offsets. A refusal is an
// InputError; what loads has tensors whose bytes match their shapes.
#include "core/train/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::InputFile file(data, size);
  fuzz::refusals_allowed([&] { (void)train::load_safetensors_metadata(file.path()); });
  fuzz::refusals_allowed([&] {
    const train::Safetensors st = train::load_safetensors(file.path());
    std::size_t bytes = 0;
    for (const auto& t : st.tensors)
      bytes += static_cast<std::size_t>(t.value.numel()) * sizeof(float);
    MDDP_FUZZ_ASSERT(bytes <= size);
  });
  return 0;
}
