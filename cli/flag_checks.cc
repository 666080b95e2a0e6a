#include "cli/flag_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include "core/comm/transport/tcp/handshake.h"
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
CLI::Validator timeout_seconds() {
  return finite_check(0, static_cast<double>(kMaxTimeoutMs) / 1000.0, true);
}

CLI::Validator whole_number_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const double v = number_of(text);
        if (!std::isfinite(v) || v != std::floor(v)) return "'" + text + "' is not a whole number";
        const std::string outside = "'" + text + "' is outside " + range;
        if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) return outside;
        if (text.find_first_of("eE") != std::string::npos) {
          if (std::fabs(v) >= 0x1p53) return "'" + text + "' is too large for an exponent";
          text = std::to_string(static_cast<int64_t>(v));  // exact below 2^53
        }
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec == std::errc::result_out_of_range) return outside;
        if (ec != std::errc{} || end != text.data() + text.size())
          return "'" + text + "' is not a whole number";
        return n < lo || n > hi ? outside : "";
      },
      "whole number in " + range);
}

CLI::Validator at_least(int64_t lo) {
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        const double v = number_of(text);
        if (std::isnan(v) || v >= static_cast<double>(lo)) return "";
        return "'" + text + "' is less than " + std::to_string(lo);
      },
      "at least " + std::to_string(lo));
}

CLI::Validator identifier(std::size_t max_bytes) {
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        if (text.empty()) return "must not be empty";
        if (text.size() > max_bytes)
          return str("is ", text.size(), " bytes long, at most ", max_bytes);
        return "";
      },
      str("TEXT of 1 to ", max_bytes, " bytes"));
}

CLI::Validator job_id_check() {
  return identifier(comm::tcp::kMaxIdBytes);  // every rank's handshake carries it
}

int local_rank_cap() {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<unsigned>(kMaxLocalRanks, 16 * cpus));
}

CLI::Validator local_ranks() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        int n = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc{} || end != text.data() + text.size() || n < 1)
          return "'" + text + "' is not a number of ranks (1, 2, ...)";
        const int cap = local_rank_cap();
        if (n > cap)
          return str(n, " ranks on one host is more than it runs well: at most ", cap,
                     " (16 per CPU, ", std::max(1u, std::thread::hardware_concurrency()),
                     " CPUs here; ", kMaxLocalRanks, " in all)");
        return "";
      },
      "RANKS");
}

std::optional<uint64_t> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoull(line.substr(13)) * 1024;  // kB
  return std::nullopt;
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
