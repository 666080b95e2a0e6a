#include "dashboard/server/auth.h"

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <cctype>

#include "core/common/check.h"
#include "dashboard/server/request_target.h"

namespace mddp::dashboard {
namespace {

constexpr std::string_view kLoginPath = "/login";

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or nullopt.
std::optional<std::string_view> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const std::size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) return pair.substr(eq + 1);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
  }
  return std::nullopt;
}

// The token of "Bearer TOKEN" (the scheme is case-insensitive), or nullopt.
std::optional<std::string_view> bearer(std::string_view header) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  header.remove_prefix(kScheme.size());
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  return header;
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// "https://h:p" -> "h:p"; "" when `origin` has no scheme.
std::string_view origin_authority(std::string_view origin) {
  const std::size_t sep = origin.find("://");
  return sep == std::string_view::npos ? std::string_view() : origin.substr(sep + 3);
}

}  // namespace

void Auth::validate_token(const std::string& token) {
  if (token.size() < kMinTokenChars)
    throw InputError(str(
        "the dashboard token (--http-token, --http-token-file) must have at least ", kMinTokenChars,
        " characters (it has ", token.size(), "); make one with `openssl rand -hex 16`"));
  if (token.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~") !=
      std::string::npos)
    throw InputError(
        "the dashboard token (--http-token, --http-token-file) may hold only letters, digits and "
        "'-._~' (it travels in the login URL and a cookie as it is)");
}

Auth::Auth(std::string token, std::string cookie_name, bool https)
    : token_(std::move(token)), cookie_name_(std::move(cookie_name)), https_(https) {
  validate_token(token_);
}

bool Auth::matches(std::string_view presented) const {
  return presented.size() == token_.size() &&
         CRYPTO_memcmp(presented.data(), token_.data(), token_.size()) == 0;
}

std::optional<Reply> Auth::check(const Credentials& r) {
  if (!enabled()) return std::nullopt;
  if (path_of(r.target) == kLoginPath) {
    std::string presented;
    try {
      const RequestTarget t = parse_target(r.target);
      if (auto it = t.query.find("token"); it != t.query.end()) presented = it->second;
    } catch (const BadRequest&) {
    }
    if (!matches(presented)) return refuse(r, true);
    return Reply{
        303,
        "text/plain",
        "logged in: see /\n",
        {{"Location", "/"},
         {"Set-Cookie", str(cookie_name_, "=", token_, "; Path=/; HttpOnly; SameSite=Strict",
                            https_ ? "; Secure" : "")}}};
  }
  const auto from_cookie = cookie_value(r.cookie, cookie_name_);
  const auto from_header = bearer(r.authorization);
  if (!from_cookie && !from_header) return refuse(r, false);
  if (!(from_cookie && matches(*from_cookie)) && !(from_header && matches(*from_header)))
    return refuse(r, true);
  // A page of another site may not open the stream with this user's cookie.
  if (r.upgrade && !r.origin.empty() && origin_authority(r.origin) != r.host)
    return Reply{403, "text/plain", "the stream is only for the dashboard's own page\n", {}};
  return std::nullopt;
}

Reply Auth::refuse(const Credentials& r, bool wrong_token) {
  if (wrong_token) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_log_ >= std::chrono::seconds(10)) {
      spdlog::warn("dashboard: refused a wrong token from {} ({}){}", r.peer, path_of(r.target),
                   unlogged_ ? str(" and ", unlogged_, " more since the last such line") : "");
      last_log_ = now;
      unlogged_ = 0;
    } else {
      ++unlogged_;
    }
  }
  return Reply{401,
               "text/plain",
               "this dashboard needs its token: open the login URL the coordinator printed "
               "(/login?token=...), or send the header 'Authorization: Bearer TOKEN'\n",
               {{"WWW-Authenticate", "Bearer realm=\"microddp\""}}};
}

}  // namespace mddp::dashboard
