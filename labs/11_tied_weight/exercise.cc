// Lab 11 — tied_weight: count a parameter's gradient contributions, so that
// its bucket waits for all of them. Read labs/11_tied_weight/README.md
// first. Check your work with:
//   cmake --build build && build/cli/microddp lab check tied_weight
#include "labs/11_tied_weight/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

bool count_contribution(std::vector<int>& uses_left, std::vector<std::size_t>& pending,
                        std::size_t param, std::size_t bucket) {
  // EXERCISE: one contribution of parameter `param` is in. Count it off
  // uses_left[param]. Only when that was its last is the parameter's
  // gradient final: then count the parameter off pending[bucket], and
  // return whether the bucket has no parameter left to wait for. The GPT's
  // tied embedding fires twice (uses 2): once after the head, first in
  // backward, and once after the embedding lookup, last.
  MDDP_LAB_TODO("count_contribution");
}

}  // namespace mddp::labs::impl
