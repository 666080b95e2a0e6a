#include "core/ddp/compression.h"

#include <charconv>
#include <cmath>

#include "core/common/check.h"

namespace mddp::ddp {
namespace {

InputError bad(const std::string& text, const std::string& why) {
  return InputError(str("--compress '", text, "': ", why,
                        " (use none, fp16, bf16, topk:RATIO with 0 < RATIO <= 1, e.g. topk:0.01, "
                        "or powersgd:RANK with RANK >= 1, e.g. powersgd:4)"));
}

// The whole of `s` as a number, or nothing.
template <typename T>
bool parse_number(const std::string& s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Compression parse_compression(const std::string& text) {
  Compression c;
  if (text == "none") return c;
  if (text == "fp16" || text == "bf16") {
    c.kind = text == "fp16" ? CompressionKind::kFp16 : CompressionKind::kBf16;
    return c;
  }
  const std::size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (name == "topk") {
    c.kind = CompressionKind::kTopK;
    if (!parse_number(arg, c.ratio) || !std::isfinite(c.ratio) || c.ratio <= 0 || c.ratio > 1)
      throw bad(text, "RATIO must be a number in (0, 1]");
    return c;
  }
  if (name == "powersgd") {
    c.kind = CompressionKind::kPowerSgd;
    if (!parse_number(arg, c.rank) || c.rank < 1 || c.rank > 1024)
      throw bad(text, "RANK must be a whole number from 1 to 1024");
    return c;
  }
  throw bad(text, "unknown kind");
}

std::string to_string(const Compression& c) {
  switch (c.kind) {
    case CompressionKind::kNone:
      return "none";
    case CompressionKind::kFp16:
      return "fp16";
    case CompressionKind::kBf16:
      return "bf16";
    case CompressionKind::kTopK:
      return str("topk:", c.ratio);
    case CompressionKind::kPowerSgd:
      return str("powersgd:", c.rank);
  }
  return "?";
}

void check_sharded_compression(const Compression& compress) {
  if (compress.kind != CompressionKind::kNone && !compress.is_half())
    throw InputError(str("--ddp sharded reduce-scatters each bucket's gradients: --compress ",
                         to_string(compress),
                         " sends something else and is not supported with it (fp16 and bf16 "
                         "are; use --ddp bucketed for top-k or PowerSGD)"));
}

HalfFormat half_format(const Compression& c) {
  return c.kind == CompressionKind::kFp16 ? HalfFormat::kFp16 : HalfFormat::kBf16;
}

comm::DataType wire_type(const Compression& c) {
  return c.kind == CompressionKind::kFp16 ? comm::DataType::kFloat16 : comm::DataType::kBFloat16;
}

}  // namespace mddp::ddp
