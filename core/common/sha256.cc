#include "core/common/sha256.h"

#include <openssl/evp.h>

#include "core/common/check.h"

namespace mddp {
namespace {
EVP_MD_CTX* md(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  MDDP_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(md(ctx_), EVP_sha256(), nullptr) == 1,
             "OpenSSL: cannot start a SHA-256 digest");
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(md(ctx_));
}

void Sha256::update(const void* data, std::size_t n) {
  MDDP_CHECK(EVP_DigestUpdate(md(ctx_), data, n) == 1, "OpenSSL: SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  MDDP_CHECK(EVP_DigestFinal_ex(md(ctx_), digest, &len) == 1, "OpenSSL: SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 15];
  }
  return out;
}

}  // namespace mddp
