// What a test reads of a refusal: the message of the InputError a call
// throws (core/common/check.h), and the pieces that message must name.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/common/check.h"

namespace mddp::test {

// What input_error_of returns when fn throws no InputError at all.
inline const std::string kNoInputError = "(no error)";

// The message of the InputError fn throws, or kNoInputError when it returns.
inline std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return kNoInputError;
}

// Expects fn to throw an InputError whose message contains every piece.
inline void expect_input_error(const std::function<void()>& fn,
                               const std::vector<std::string>& pieces) {
  const std::string msg = input_error_of(fn);
  if (msg == kNoInputError) ADD_FAILURE() << "expected an InputError";
  for (const auto& p : pieces)
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

}  // namespace mddp::test
