// Planted bugs for proving that a test bites (docs/pytorch.md): with the
// environment variable MDDP_TEST_MUTATION=NAME one deliberate mistake is
// switched on, and the PyTorch oracle test (tests/pytorch/) must then fail,
// naming a tensor. The variable is read here and nowhere else; unset, as it
// always is outside that test, nothing changes. The mutations (CPU ops):
//
//   adam_no_bias_correction  Adam updates without 1/(1 - beta^t)
//   relu_mask_inverted       ReLU's backward passes the gradient where the input was <= 0
#pragma once

namespace mddp {

// True when MDDP_TEST_MUTATION names `mutation` (read once per process).
bool test_mutation(const char* mutation);

}  // namespace mddp
