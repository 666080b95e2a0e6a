// connect_gloo in a build without gloo (MICRODDP_GLOO=OFF, or no libgloo-dev).
#include "core/comm/gloo/gloo.h"
#include "core/common/check.h"

namespace mddp::comm::gloo {

std::unique_ptr<ProcessGroup> connect_gloo(Store&, int, int, const GlooOptions&) {
  throw InputError(
      "this microddp was built without gloo, so it has no --backend gloo (install Debian's "
      "libgloo-dev and "
      "reconfigure, or use --backend cpu, microddp's own collectives)");
}

std::string gloo_version() {
  return "none (built without gloo)";
}

}  // namespace mddp::comm::gloo
