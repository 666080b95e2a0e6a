// The request target ("/api/metrics?since=3&max=10") split into a decoded
// path and query parameters, with the path checks every route relies on:
// no "..", no backslash, no NUL, before or after percent-decoding.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/check.h"

namespace mddp::dashboard {

// A request the server refuses with 400 and this message.
class BadRequest : public InputError {
 public:
  using InputError::InputError;
};

struct RequestTarget {
  std::string path;                          // percent-decoded, starts with '/'
  std::map<std::string, std::string> query;  // percent-decoded; a repeated key keeps the last

  // The integer parameter `key`, or `fallback` when absent; BadRequest when
  // it is not an integer in [lo, hi].
  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  bool has(const std::string& key) const { return query.count(key) != 0; }
};

// Throws BadRequest on a malformed target (no leading '/', a bad %-escape)
// and on a path that could climb out of a directory ("..", '\', NUL).
RequestTarget parse_target(std::string_view target);

}  // namespace mddp::dashboard
