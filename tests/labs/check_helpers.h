// What the Labs' tests share: the options the checkers run with here (every
// world size and both transports, as `microddp lab check` does, without the
// speed comparison), and running one check into a Report.
#pragma once

#include <gtest/gtest.h>

#include "core/tensor/ops.h"
#include "labs/registry.h"

namespace mddp::labs::test {

inline CheckOptions options() {
  CheckOptions o;
  o.speed_ranks = 0;
  o.root_dir = source_root();
  return o;
}

inline Report run_check(const std::string& name, const Implementations& impl,
                        const CheckOptions& o = options()) {
  tensor::set_num_threads(1);  // as `microddp lab check` does
  Report report;
  find_lab(name).check(impl, o, report);
  return report;
}

}  // namespace mddp::labs::test
