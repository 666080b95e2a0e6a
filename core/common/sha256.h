// SHA-256 through OpenSSL's libcrypto (no hand-written crypto): feed bytes
// with update(), read the digest once with hex().
#pragma once

#include <cstddef>
#include <string>

namespace mddp {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t n);
  // The digest of everything fed so far, as 64 lowercase hex digits. Call once.
  std::string hex();

 private:
  void* ctx_;  // EVP_MD_CTX, kept out of this header
};

}  // namespace mddp
