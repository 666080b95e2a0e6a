// Replaces a small file through a temporary and a rename, so a reader sees
// the old content or the new, never half of one: job.json, the address
// files. On any failure (a full disk included) the temporary is removed and
// the old file is left as it was.
#pragma once

#include <string>
#include <string_view>

namespace mddp {

// Writes `text` to `path`. Returns "" or why it could not (errno's words).
std::string write_atomically(const std::string& path, std::string_view text);

}  // namespace mddp
