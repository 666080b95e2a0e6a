// Who may read the dashboard: with a token (--http-token, --http-token-file)
// every request must carry it, else it is answered 401 and nothing of the
// job. A browser logs in once at /login?token=TOKEN (the URL the
// coordinator prints), which sets an HttpOnly, SameSite=Strict cookie and
// redirects to the page; a scraper (Prometheus' /metrics) sends
// `Authorization: Bearer TOKEN`. Tokens are compared in constant time; a
// WebSocket upgrade must also come from the page's own origin (no other
// site can open the stream with the user's cookie). Without a token every
// request passes (bind 127.0.0.1 then: cmd_coordinator.cc warns otherwise).
// Pure functions of the request's fields: no sockets, io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dashboard/server/routes.h"

namespace mddp::dashboard {

// The fields of a request that decide.
struct Credentials {
  std::string_view target{};          // request target, "/login?token=..."
  std::string_view cookie{};          // the Cookie header ("" when none)
  std::string_view authorization{};   // the Authorization header
  std::string_view origin{}, host{};  // Origin and Host headers (for a WebSocket upgrade)
  bool upgrade = false;               // a WebSocket upgrade request
  std::string_view peer{};            // the client's address, for the log
};

class Auth {
 public:
  // Minimum length of a token: short ones can be guessed over the network.
  static constexpr std::size_t kMinTokenChars = 16;

  // Throws InputError for a token shorter than kMinTokenChars or with
  // characters other than letters, digits and "-._~" (it travels in a URL
  // and a cookie as it is).
  static void validate_token(const std::string& token);

  Auth() = default;  // no token: everything passes
  // `cookie_name`: unique per server (cookies are per host, not per port).
  // Throws as validate_token().
  Auth(std::string token, std::string cookie_name, bool https);

  bool enabled() const { return !token_.empty(); }
  // nullopt: serve the request. Else the reply to send instead: 303 to "/"
  // with the cookie for a good /login, 401 (a wrong or missing token), 403
  // (a WebSocket upgrade from another origin). Logs wrong tokens with the
  // peer's address, at most one line every 10 s.
  std::optional<Reply> check(const Credentials& request);

 private:
  bool matches(std::string_view presented) const;
  Reply refuse(const Credentials& request, bool wrong_token);

  std::string token_, cookie_name_;
  bool https_ = false;
  std::chrono::steady_clock::time_point last_log_{};
  uint64_t unlogged_ = 0;
};

}  // namespace mddp::dashboard
