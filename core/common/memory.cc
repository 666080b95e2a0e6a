#include "core/common/memory.h"

#include <unistd.h>

#include <cstdio>

#include "core/common/check.h"

namespace mddp {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

void require_memory(double bytes, const std::string& what) {
  const int64_t have = physical_memory_bytes();
  if (have <= 0 || bytes <= static_cast<double>(have)) return;
  char need_gb[32], have_gb[32];
  std::snprintf(need_gb, sizeof need_gb, "%.3g", bytes / 1e9);
  std::snprintf(have_gb, sizeof have_gb, "%.3g", static_cast<double>(have) / 1e9);
  throw InputError(str(what, " needs at least ", need_gb, " GB, more than this machine's ", have_gb,
                       " GB of memory; make it smaller"));
}

}  // namespace mddp
