// When a parameter's gradient is final — a pure function, tested on its own.
//
// Note [Contributions]
// ~~~~~~~~~~~~~~~~~~~~
// A parameter used k times in forward (nn::Parameter::uses; the GPT's tied
// token embedding: 2, Note [Tied weight] in core/nn/gpt.h) gets k gradient
// contributions in backward, and its grad-ready hook fires after each (Note
// [Grad-ready hooks] in core/nn/module.h). Its gradient is final only after
// the last, so DDP counts contributions, not firings: uses_left[i] counts
// down parameter i's, and only the last one makes its bucket wait for one
// gradient fewer. Counting firings instead is the classic bug: the tied
// weight's bucket then leaves with the head's share alone, and the
// embedding's share, added later, is never averaged (docs/transformer.md).
#pragma once

#include <cstddef>
#include <vector>

namespace mddp::nn {
struct Parameter;
}

namespace mddp::ddp {

// Parameter `param`, which lives in bucket `bucket`, got one gradient
// contribution. uses_left[param] counts the contributions it still awaits
// in this backward (> 0 on entry: the caller checks), pending[bucket] the
// parameters of the bucket whose gradient is not final yet. Returns true
// when this contribution completed the bucket (it may then be launched).
bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket);

// Each parameter's nn::Parameter::uses, checked to be at least 1.
std::vector<int> uses_of(const std::vector<nn::Parameter*>& params);

}  // namespace mddp::ddp
