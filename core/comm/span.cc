#include "core/comm/span.h"

#include "core/common/check.h"

namespace mddp::comm {

const char* to_string(SpanOp op) {
  switch (op) {
    case SpanOp::kAllReduce:
      return "all_reduce";
    case SpanOp::kAllGather:
      return "all_gather";
    case SpanOp::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

SpanOp parse_span_op(const std::string& s) {
  if (s == "all_reduce") return SpanOp::kAllReduce;
  if (s == "all_gather") return SpanOp::kAllGather;
  if (s == "reduce_scatter") return SpanOp::kReduceScatter;
  throw InputError("unknown collective '" + s + "' (all_reduce, all_gather or reduce_scatter)");
}

}  // namespace mddp::comm
