#include "core/comm/nccl/unique_id.h"

#include "core/comm/types.h"

namespace mddp::comm::nccl {

std::string to_hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
  }
  return hex;
}

namespace {
int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string from_hex(const std::string& hex, const std::string& what) {
  if (hex.size() % 2 != 0)
    throw CommError(str(what, ": odd-length hex string (", hex.size(), " characters)"));
  std::string bytes(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw CommError(str(what, ": not a hex string (bad character at ", 2 * i, ")"));
    bytes[i] = static_cast<char>(hi << 4 | lo);
  }
  return bytes;
}

std::string exchange_unique_id(Store& store, int rank, const std::string& key, std::size_t id_bytes,
                               const std::function<std::string()>& create,
                               std::chrono::milliseconds timeout) {
  if (rank == 0) {
    std::string id = create();
    MDDP_CHECK_EQ(id.size(), id_bytes, "the created NCCL unique id has the wrong size");
    store.set(key, to_hex(id));
    return id;
  }
  const std::string what = str("rank ", rank, ": the NCCL unique id under store key '", key, "'");
  std::string id = from_hex(store.get(key, timeout), what);
  if (id.size() != id_bytes)
    throw CommError(str(what, " has ", id.size(), " bytes, expected ", id_bytes,
                        " (another microddp version, or a stale key from an earlier job?)"));
  return id;
}

}  // namespace mddp::comm::nccl
