// Files a run writes, so that a failure never leaves half of one: small
// files replaced through a rename, and the directories named by flags.
#pragma once

#include <string>
#include <string_view>

namespace mddp {

// Replaces `path` with `text` through a temporary and a rename, so a reader
// sees the old content or the new, never half of one (job.json, the address
// files), and writers at once each leave a whole file (the last rename
// wins). On any failure (a full disk included) the temporary is removed and
// the old file is left as it was. Returns "" or why it could not (errno's words).
// `mode` 0600 for what carries a secret (the dashboard's URL with its token).
std::string write_atomically(const std::string& path, std::string_view text, unsigned mode = 0644);

// Creates directory `dir` and its parents when missing; InputError naming
// `flag` (e.g. "--run-dir") when it cannot be.
void make_dirs(const std::string& dir, const char* flag);

}  // namespace mddp
