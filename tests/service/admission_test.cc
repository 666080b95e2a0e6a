// Admission (who may join) and the proofs it checks, without gRPC, with time
// driven by hand: the proof against a vector computed independently (Python's
// hmac module), and every refusal: wrong, missing, replayed and expired
// proofs, another protocol version, another job.
#include "coordinator/admission.h"

#include <gtest/gtest.h>

#include "control/proof.h"
#include "core/common/check.h"
#include "core/common/hmac.h"
#include "service/test_clock.h"

namespace mddp::coordinator {
namespace {

using namespace std::chrono_literals;

// hmac.new(key, b"".join(struct.pack("<I", len(p)) + p for p in parts), hashlib.sha256)
TEST(Proof, MatchesAnIndependentHmacSha256) {
  EXPECT_EQ(
      to_hex(hmac_sha256("key", "The quick brown fox jumps over the lazy dog")),
      "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");  // RFC 4231 style vector
  EXPECT_EQ(
      to_hex(join_proof("tok", "job", std::string(32, 'S'), std::string(32, 'C'), "host-a", 4242)),
      "ce61735d7c8bef52ed9b4ecc491e1f8c3c8a34f9a2c6413b1067db3a811b0340");
  EXPECT_EQ(to_hex(data_plane_key("tok", "job", std::string(32, 'N'))),
            "2f9f69936bb339f03e3b347ba68154440c2da2ce48ff8f865237bee97ff05c73");
  // Length-prefixed: moving a byte between parts changes the transcript.
  EXPECT_NE(transcript({"ab", "c"}), transcript({"a", "bc"}));
  EXPECT_NE(data_plane_key("tok", "job", std::string(32, 'N')),
            data_plane_key("tok", "job", std::string(32, 'M')))
      << "a key of one attempt is useless in the next";
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", std::string_view("abc\0", 4)));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

Admission admission() {
  Admission::Options o;
  o.job_id = "job";
  o.token = "secret";
  o.nonce_ttl = 30s;
  o.max_nonces = 4;
  return Admission(o);
}

// A join of `host` proven with `token` over a fresh nonce from `a`.
JoinRequest proven(Admission& a, const std::string& token, TimePoint now,
                   const std::string& host = "h") {
  const Admission::Challenge c = a.hello("job", kProtocolVersion, now);
  EXPECT_TRUE(c.outcome.ok()) << c.outcome.message;
  JoinRequest r;
  r.job_id = "job";
  r.protocol_version = kProtocolVersion;
  r.host = host;
  r.pid = 77;
  r.server_nonce = c.server_nonce;
  r.client_nonce = random_bytes(kNonceBytes);
  r.proof = join_proof(token, r.job_id, r.server_nonce, r.client_nonce, r.host, r.pid);
  return r;
}

TEST(Admission, ARightProofIsAdmittedOnce) {
  Admission a = admission();
  const JoinRequest r = proven(a, "secret", t0);
  EXPECT_TRUE(a.admit(r, t0 + 1s).ok());
  const Outcome again = a.admit(r, t0 + 2s);
  EXPECT_EQ(again.code, Code::kUnauthenticated);
  EXPECT_NE(again.message.find("replay"), std::string::npos) << again.message;
}

TEST(Admission, WrongMissingExpiredAndMadeUpProofsAreRefused) {
  Admission a = admission();
  const Outcome wrong = a.admit(proven(a, "guess", t0), t0);
  EXPECT_EQ(wrong.code, Code::kUnauthenticated);
  EXPECT_NE(wrong.message.find("wrong token"), std::string::npos) << wrong.message;
  EXPECT_EQ(wrong.message.find("'job'"), std::string::npos)
      << "a stranger does not learn the job id";
  const Outcome none = a.admit(proven(a, "", t0), t0);
  EXPECT_EQ(none.code, Code::kUnauthenticated);
  EXPECT_NE(none.message.find("no token given"), std::string::npos) << none.message;
  const Outcome late = a.admit(proven(a, "secret", t0), t0 + 31s);
  EXPECT_EQ(late.code, Code::kUnauthenticated);
  EXPECT_NE(late.message.find("expired"), std::string::npos) << late.message;
  JoinRequest made_up = proven(a, "secret", t0);
  made_up.server_nonce = random_bytes(kNonceBytes);
  made_up.proof = join_proof("secret", "job", made_up.server_nonce, made_up.client_nonce, "h", 77);
  EXPECT_EQ(a.admit(made_up, t0).code, Code::kUnauthenticated) << "a nonce never handed out";
  JoinRequest no_hello = made_up;
  no_hello.server_nonce.clear();
  EXPECT_NE(a.admit(no_hello, t0).message.find("call Hello first"), std::string::npos);
  // The proof binds the host and pid it was made for.
  JoinRequest moved = proven(a, "secret", t0);
  moved.pid = 78;
  EXPECT_EQ(a.admit(moved, t0).code, Code::kUnauthenticated);
}

TEST(Admission, AnotherProtocolVersionOrJobIsRefused) {
  Admission a = admission();
  const Admission::Challenge v1 = a.hello("job", 1, t0);
  EXPECT_EQ(v1.outcome.code, Code::kFailedPrecondition);
  EXPECT_NE(v1.outcome.message.find(str("protocol v1, this coordinator v", kProtocolVersion)),
            std::string::npos)
      << v1.outcome.message;
  JoinRequest old = proven(a, "secret", t0);
  old.protocol_version = 1;
  EXPECT_EQ(a.admit(old, t0).code, Code::kFailedPrecondition);
  EXPECT_EQ(a.hello("other", kProtocolVersion, t0).outcome.code, Code::kFailedPrecondition);
  JoinRequest other = proven(a, "secret", t0);
  other.job_id = "other";
  other.proof = join_proof("secret", "other", other.server_nonce, other.client_nonce, "h", 77);
  const Outcome o = a.admit(other, t0);
  EXPECT_EQ(o.code, Code::kFailedPrecondition);
  EXPECT_NE(o.message.find("job 'other' but this coordinator runs job 'job'"), std::string::npos)
      << o.message;
}

// A flood of Hellos keeps at most max_nonces outstanding: the oldest go first.
TEST(Admission, OutstandingNoncesAreBounded) {
  Admission a = admission();
  const JoinRequest first = proven(a, "secret", t0);
  for (int i = 0; i < 10; ++i) a.hello("job", kProtocolVersion, t0);
  EXPECT_LE(a.outstanding(), 4u);
  EXPECT_EQ(a.admit(first, t0).code, Code::kUnauthenticated) << "the oldest nonce was dropped";
  EXPECT_TRUE(a.admit(proven(a, "secret", t0), t0).ok());
}

}  // namespace
}  // namespace mddp::coordinator
