// Planted bugs for proving that a test bites (docs/pytorch.md): with the
// environment variable MDDP_TEST_MUTATION=NAME one deliberate mistake is
// switched on, and the PyTorch oracle tests (tests/pytorch/) must then fail,
// naming the tensor or the step that differs. The variable is read here and
// nowhere else; unset, as it always is outside those tests, nothing changes.
// The mutations (on the CPU):
//
//   adam_no_bias_correction  Adam updates without 1/(1 - beta^t)
//   relu_mask_inverted       ReLU's backward passes the gradient where the input was <= 0
//   causal_mask_off_by_one   the GPT's attention lets position i see position i + 1 too
//   tied_grad_first_contribution
//                            the GPT's tied embedding/head weight counts one contribution:
//                            DDP sends it after the head's alone (the classic tied-weight bug)
//   clip_before_allreduce    each DDP rank clips its local gradient, before the average
//
// The first two are caught by tests/pytorch/oracle.py, the last three by
// tests/pytorch/gpt_oracle.py.
#pragma once

namespace mddp {

// True when MDDP_TEST_MUTATION names `mutation` (read once per process).
bool test_mutation(const char* mutation);

}  // namespace mddp
