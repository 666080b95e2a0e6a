// The dashboard's handling of one HTTP request from a stranger, as
// http_session.cc does it: Beast's parser under the session's limits (8 KiB
// header, no body), then the access check (auth.h, with a token), then the
// route (request_target.h, routes.h) over a live two-rank job. Refusals are
// HTTP statuses; a crash, an escaped exception or a 5xx is a finding.
#include <boost/beast/http.hpp>

#include "dashboard/server/auth.h"
#include "dashboard/server/http_session.h"
#include "dashboard/server/request_target.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/job_fixture.h"

using namespace mddp;
namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::JobFixture fixture;
  static dashboard::Auth auth("0123456789abcdef-token", "microddp_8080", false);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(dashboard::HttpSession::kMaxHeaderBytes);
  parser.body_limit(0);
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (!ec && !parser.is_done() && used < size) {
    used += parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec == http::error::need_more) break;
  }
  if (ec || !parser.is_done()) return 0;  // refused (400, 413, 431) or incomplete: nothing routed
  const auto& req = parser.get();
  fuzz::refusals_allowed([&] { (void)dashboard::parse_target(req.target()); });
  const auto refusal =
      auth.check({req.target(), req[http::field::cookie], req[http::field::authorization],
                  req[http::field::origin], req[http::field::host], false, "fuzz"});
  if (refusal) {
    MDDP_FUZZ_ASSERT(refusal->status == 303 || refusal->status == 401 || refusal->status == 403);
    return 0;
  }
  const dashboard::StaticFiles files{std::filesystem::path()};
  dashboard::Tracker tracker(fixture.job);
  const dashboard::Reply r = dashboard::route(req.target(), {fixture.job, tracker, files});
  MDDP_FUZZ_ASSERT(r.status < 500);
  return 0;
}
