// A JSON number read as a C++ arithmetic type only when the value fits it:
// an integer type takes integers in its range, a floating type any number
// within its range. The readers of files and messages (the metrics log, the
// job config) refuse the rest by name, where nlohmann's get<T>() would
// convert silently (a negative count to a huge one) or, for a value out of
// range, with undefined behaviour (found by tests/fuzz/metrics_log).
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <utility>

namespace mddp {

template <typename T>
std::optional<T> json_number(const nlohmann::json& v) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "numbers only");
  if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const auto x = v.get<uint64_t>();
      if (std::in_range<T>(x)) return static_cast<T>(x);
    } else if (v.is_number_integer()) {
      const auto x = v.get<int64_t>();
      if (std::in_range<T>(x)) return static_cast<T>(x);
    }
    return std::nullopt;
  } else {
    if (!v.is_number()) return std::nullopt;
    const double x = v.get<double>();  // JSON has no NaN or infinity
    if (x < static_cast<double>(std::numeric_limits<T>::lowest()) ||
        x > static_cast<double>(std::numeric_limits<T>::max()))
      return std::nullopt;
    return static_cast<T>(x);
  }
}

// j[key] as T when j has the key and its value is a number that fits T, else nullopt.
template <typename T>
std::optional<T> number_at(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? json_number<T>(j[key]) : std::nullopt;
}

}  // namespace mddp
