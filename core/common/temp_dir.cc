#include "core/common/temp_dir.h"

#include <stdlib.h>

#include <cstdlib>

#include "core/common/check.h"

namespace mddp {

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw Error("cannot create a temporary directory under " + tmpl);
  return tmpl;
}

}  // namespace mddp
