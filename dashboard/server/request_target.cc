#include "dashboard/server/request_target.h"

#include <charconv>

namespace mddp::dashboard {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      const int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
      const int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
      if (lo < 0) throw BadRequest("bad percent-escape in the request target");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus_is_space && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

}  // namespace

int64_t RequestTarget::integer(const std::string& key, int64_t fallback, int64_t lo,
                               int64_t hi) const {
  auto it = query.find(key);
  if (it == query.end()) return fallback;
  const std::string& v = it->second;
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    throw BadRequest(str("query parameter ", key, "=", v, ": want an integer in ", lo, "..", hi));
  return x;
}

RequestTarget parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/')
    throw BadRequest("the request target must be a path starting with '/'");
  const std::size_t q = target.find('?');
  const std::string_view raw_path = target.substr(0, q);
  RequestTarget t;
  t.path = percent_decode(raw_path, false);
  // Checked after decoding, so "%2e%2e", "%5c" and "%00" are caught too.
  if (t.path.find("..") != std::string::npos || t.path.find('\\') != std::string::npos ||
      t.path.find('\0') != std::string::npos)
    throw BadRequest("the path may not contain '..', a backslash or NUL");
  if (q == std::string_view::npos) return t;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (!pair.empty())
      t.query[percent_decode(pair.substr(0, eq), true)] =
          eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
  }
  return t;
}

}  // namespace mddp::dashboard
