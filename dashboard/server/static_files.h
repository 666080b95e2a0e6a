// The page's files: compiled in (dashboard/assets.h), or read from a
// directory on every request while developing (--dashboard-dir), so an edit
// shows on reload without a rebuild.
//
// From disk, a path is served only when, after resolving symlinks, it is a
// regular file inside the directory: parse_target() has already refused
// "..", backslashes and NUL; an absolute remainder ("//etc/passwd") is
// refused here, and a symlink that leads out of the directory is answered
// 403.
#pragma once

#include <filesystem>
#include <string>

namespace mddp::dashboard {

struct StaticReply {
  int status = 404;  // 200, 400, 403 or 404
  std::string content_type;
  std::string body;  // the file, or why not
};

class StaticFiles {
 public:
  // `dir` "": the compiled-in assets. Otherwise it must be a directory
  // (InputError naming --dashboard-dir if not).
  explicit StaticFiles(const std::filesystem::path& dir);

  // The file for a decoded URL path ("/" means "/index.html").
  StaticReply get(const std::string& url_path) const;

 private:
  StaticReply from_disk(const std::string& relative) const;

  std::filesystem::path root_;  // canonical; "" = compiled in
};

// "text/html; charset=utf-8" for "x.html", ...; application/octet-stream when unknown.
std::string content_type_for(const std::filesystem::path& file);

}  // namespace mddp::dashboard
