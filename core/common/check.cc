#include "core/common/check.h"

namespace mddp::detail {

// A failed check is a bug in microddp (or a caller breaking a documented
// contract), so it says exactly where, for the bug report.
void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "internal check failed: " << expr << " at " << file << ":" << line;
  if (!msg.empty()) os << " (" << msg << ")";
  throw std::logic_error(os.str());
}

}  // namespace mddp::detail

namespace mddp {

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace mddp
