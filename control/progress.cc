#include "control/progress.h"

#include "core/common/check.h"

namespace mddp::control {

std::string describe(const Progress& p) {
  if (p.phase == "setup" && p.step == 0 && p.collective_entered == 0) return "setup";
  std::string d = str(p.phase, " of step ", p.step);
  if (p.collective_entered > p.collective_completed) {
    d += str(", in ", p.op.empty() ? std::string("collective") : p.op, " #", p.collective_entered);
    if (p.bucket >= 0) d += str(" of bucket ", p.bucket);
  }
  return d;
}

}  // namespace mddp::control
