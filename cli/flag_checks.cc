#include "cli/flag_checks.h"

#include <cmath>
#include <string>

#include "core/common/check.h"
#include "core/ddp/compression.h"

namespace mddp::cli {
namespace {

// The number `text` holds, or NaN when it holds none (the type check, which
// runs after validators, then names the flag).
double number_of(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() ? v : std::nan("");
  } catch (const std::exception&) {  // not a number, or out of double's range
    return std::nan("");
  }
}

std::string bound(double v) {
  return v == kNoLimit ? "inf" : CLI::detail::to_string(v);
}

CLI::Validator finite_check(double lo, double hi, bool open_low) {
  const std::string range =
      (open_low ? "(" : "[") + bound(lo) + ", " + bound(hi) + (hi == kNoLimit ? ")" : "]");
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        const double v = number_of(text);
        if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
        if (v < lo || v > hi || (open_low && v == lo)) return "'" + text + "' is outside " + range;
        return "";
      },
      "finite, in " + range);
}

}  // namespace

CLI::Validator finite_in(double lo, double hi) {
  return finite_check(lo, hi, false);
}
CLI::Validator finite_above(double lo) {
  return finite_check(lo, kNoLimit, true);
}

CLI::Validator compression_spec() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        try {
          ddp::parse_compression(text);
          return "";
        } catch (const InputError& e) {
          const std::string why = e.what(), flag = "--compress ";  // CLI11 names the flag itself
          return why.rfind(flag, 0) == 0 ? why.substr(flag.size()) : why;
        }
      },
      "none|fp16|bf16|topk:RATIO|powersgd:RANK");
}

}  // namespace mddp::cli
