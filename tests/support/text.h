// Small words the tests' expectations share.
#pragma once

#include <string>

namespace mddp::test {

// Whether `part` occurs in `s`: EXPECT_TRUE(contains(e.what(), "rank 1")).
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace mddp::test
