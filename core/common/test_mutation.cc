#include "core/common/test_mutation.h"

#include <cstdlib>
#include <string>

namespace mddp {

bool test_mutation(const char* mutation) {
  static const std::string active = [] {
    const char* v = std::getenv("MDDP_TEST_MUTATION");
    return std::string(v ? v : "");
  }();
  return !active.empty() && active == mutation;
}

}  // namespace mddp
