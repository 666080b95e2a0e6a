// The frame header both transports write before every message (see the spec
// comments of tcp/tcp_transport.cc and shm/shm_transport.cc):
//
//   u32 magic | u32 sequence | u64 length        16 bytes, little-endian
//
// The sequence counts the frames of one direction from 0. The receiver names
// the byte count it expects, so it checks a header before it touches a single
// payload byte: a wrong magic means the stream is corrupt, a wrong sequence
// that it is out of step, a wrong length that the two ranks are running
// different collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ios>
#include <string>

#include "core/common/check.h"

namespace mddp::comm::frame {

constexpr uint32_t kMagic = 0x4644444d;  // bytes 'M' 'D' 'D' 'F'
constexpr std::size_t kHeaderBytes = 16;

// The `bytes`-byte little-endian integer at p.
inline uint64_t load_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
inline void store_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

struct Header {
  uint32_t magic = kMagic;
  uint32_t seq = 0;
  uint64_t length = 0;
};

inline void encode(uint8_t* p, const Header& h) {
  store_le(p, h.magic, 4);
  store_le(p + 4, h.seq, 4);
  store_le(p + 8, h.length, 8);
}
inline Header decode(const uint8_t* p) {
  return {static_cast<uint32_t>(load_le(p, 4)), static_cast<uint32_t>(load_le(p + 4, 4)),
          load_le(p + 8, 8)};
}

// Why header `h` from rank `from` is not frame #seq of `bytes` bytes, the one
// rank `me` expects next, or "" when it is. `known_magic`: whether h.magic is
// one this transport sends (shm has two kinds of frame).
inline std::string mismatch(const Header& h, bool known_magic, int from, int me, uint32_t seq,
                            uint64_t bytes) {
  if (!known_magic)
    return str("rank ", from, " sent a corrupt frame header (bad magic 0x", std::hex, h.magic, ")");
  if (h.seq != seq)
    return str("rank ", from, " sent frame #", h.seq, " where #", seq, " was expected");
  if (h.length != bytes)
    return str("rank ", from, " sent a message of ", h.length, " bytes but rank ", me, " expected ",
               bytes, " bytes: the ranks are running different collectives or sizes");
  return "";
}

}  // namespace mddp::comm::frame
