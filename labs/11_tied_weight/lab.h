// Lab 11 — tied_weight: when a parameter used twice in forward is ready
// (docs/transformer.md). What you write (my_work/tied_weight.cc): the
// counting rule of ddp::BucketRules, with the signature of the reference
// ddp::count_contribution (core/ddp/contributions.h, Note
// [Contributions]). The checker runs the real Reducer (core/ddp/reducer.cc)
// on a GPT whose LM head is its token embedding, with your rule.
#pragma once

#include <cstddef>
#include <vector>

namespace mddp::labs::impl {

// Parameter `param`, which lives in bucket `bucket`, got one gradient
// contribution (its grad-ready hook fired). uses_left[param] counts the
// contributions it still awaits in this backward (> 0 on entry),
// pending[bucket] the parameters of the bucket whose gradient is not final
// yet. Return true when this contribution completed the bucket.
bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket);

}  // namespace mddp::labs::impl
