// The dashboard's access check (dashboard/server/auth.h) as a pure function:
// which requests pass, which log in, which are refused and how.
#include "dashboard/server/auth.h"

#include <gtest/gtest.h>

#include "core/common/check.h"

namespace mddp::dashboard {
namespace {

const std::string kToken = "0123456789abcdef-token";

Auth auth(bool https = false) {
  return Auth(kToken, "microddp_8080", https);
}

int status(Auth& a, Credentials c) {
  const auto r = a.check(c);
  return r ? r->status : 200;
}

TEST(DashboardAuth, WithoutATokenEverythingPasses) {
  Auth open;
  EXPECT_FALSE(open.enabled());
  EXPECT_EQ(status(open, {.target = "/api/job"}), 200);
  EXPECT_EQ(
      status(open,
             {.target = "/api/stream", .origin = "https://evil", .host = "h:1", .upgrade = true}),
      200);
}

TEST(DashboardAuth, NoTokenIsRefusedWithBearerChallengeAndNoData) {
  Auth a = auth();
  for (const char* target :
       {"/", "/api/job", "/metrics", "/app.js", "/api/stream", "/login", "/login?x=1"}) {
    const auto r = a.check({.target = target});
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 401) << target;
    EXPECT_EQ(r->content_type, "text/plain");
    EXPECT_NE(r->body.find("needs its token"), std::string::npos);
    ASSERT_EQ(r->headers.size(), 1u);
    EXPECT_EQ(r->headers[0].first, "WWW-Authenticate");
  }
}

TEST(DashboardAuth, BearerHeaderPassesCaseInsensitiveScheme) {
  Auth a = auth();
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = "Bearer " + kToken}), 200);
  const std::string lower = "bearer " + kToken, spaced = "BEARER   " + kToken;
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = lower}), 200);
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = spaced}), 200);
  const std::string wrong = "Bearer " + kToken + "x", prefix = "Bearer " + kToken.substr(0, 10),
                    basic = "Basic " + kToken;
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = wrong}), 401);
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = prefix}), 401);
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = basic}), 401);
  EXPECT_EQ(status(a, {.target = "/metrics", .authorization = "Bearer "}), 401);
}

TEST(DashboardAuth, CookiePassesOnlyUnderItsOwnName) {
  Auth a = auth();
  const std::string good = "other=1; microddp_8080=" + kToken + "; x=y";
  EXPECT_EQ(status(a, {.target = "/", .cookie = good}), 200);
  const std::string first = "microddp_8080=" + kToken;
  EXPECT_EQ(status(a, {.target = "/", .cookie = first}), 200);
  const std::string other_port = "microddp_9090=" + kToken;  // another dashboard's cookie
  EXPECT_EQ(status(a, {.target = "/", .cookie = other_port}), 401);
  const std::string wrong = "microddp_8080=" + kToken + "0";
  EXPECT_EQ(status(a, {.target = "/", .cookie = wrong}), 401);
  EXPECT_EQ(status(a, {.target = "/", .cookie = "microddp_8080"}), 401);
  // A wrong cookie does not hide a good bearer.
  const std::string bearer = "Bearer " + kToken;
  EXPECT_EQ(status(a, {.target = "/", .cookie = wrong, .authorization = bearer}), 200);
}

TEST(DashboardAuth, LoginSetsAStrictHttpOnlyCookieAndRedirects) {
  for (bool https : {false, true}) {
    Auth a = auth(https);
    const std::string target = "/login?token=" + kToken;
    const auto r = a.check({.target = target});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 303);
    std::string location, cookie;
    for (const auto& [k, v] : r->headers) (k == "Location" ? location : cookie) = v;
    EXPECT_EQ(location, "/");
    EXPECT_EQ(cookie, "microddp_8080=" + kToken + "; Path=/; HttpOnly; SameSite=Strict" +
                          (https ? "; Secure" : ""));
  }
  Auth a = auth();
  const std::string wrong = "/login?token=" + kToken + "x", escaped = "/login?token=%zz";
  EXPECT_EQ(status(a, {.target = wrong}), 401);
  EXPECT_EQ(status(a, {.target = escaped}), 401);
  EXPECT_EQ(status(a, {.target = "/login?token="}), 401);
}

TEST(DashboardAuth, StreamUpgradeNeedsThePagesOwnOrigin) {
  Auth a = auth();
  const std::string cookie = "microddp_8080=" + kToken;
  Credentials c{
      .target = "/api/stream", .cookie = cookie, .host = "127.0.0.1:8080", .upgrade = true};
  EXPECT_EQ(status(a, c), 200);  // no Origin: not a browser
  c.origin = "http://127.0.0.1:8080";
  EXPECT_EQ(status(a, c), 200);
  c.origin = "https://127.0.0.1:8080";
  EXPECT_EQ(status(a, c), 200);
  c.origin = "http://127.0.0.1:9999";
  EXPECT_EQ(status(a, c), 403);
  c.origin = "https://evil.example";
  EXPECT_EQ(status(a, c), 403);
  c.cookie = "";
  EXPECT_EQ(status(a, c), 401);  // the token first: a stranger learns nothing more
}

TEST(DashboardAuth, UnusableTokensAreRefused) {
  EXPECT_THROW(Auth::validate_token("short"), InputError);
  EXPECT_THROW(Auth::validate_token("0123456789abcdef 0"), InputError);
  EXPECT_THROW(Auth::validate_token("0123456789abcdef;0"), InputError);
  EXPECT_THROW(Auth::validate_token("0123456789abcdef%0"), InputError);
  EXPECT_NO_THROW(Auth::validate_token("0123456789abcdef"));
  EXPECT_NO_THROW(Auth::validate_token("A-z.0_~9aaaaaaaaaaaa"));
}

}  // namespace
}  // namespace mddp::dashboard
