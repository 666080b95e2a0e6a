// A fresh, empty directory for the files of one run of something (the
// rendezvous of local ranks, a benchmark's scratch): under $TMPDIR, else /tmp.
#pragma once

#include <string>

namespace mddp {

// "<tmp>/<prefix>-XXXXXX", created; the caller removes it. Throws Error.
std::string make_temp_dir(const std::string& prefix);

}  // namespace mddp
