#include "dashboard/server/static_files.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/common/check.h"
#include "dashboard/assets.h"

namespace mddp::dashboard {

namespace fs = std::filesystem;

std::string content_type_for(const fs::path& file) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  };
  auto it = kTypes.find(file.extension().string());
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

StaticFiles::StaticFiles(const fs::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  root_ = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root_))
    throw InputError(str("--dashboard-dir ", dir, " is not a directory"));
}

StaticReply StaticFiles::get(const std::string& url_path) const {
  std::string relative = url_path.substr(1);  // parse_target: url_path starts with '/'
  if (relative.empty() || relative.back() == '/') relative += "index.html";
  if (relative.front() == '/') return {400, "text/plain", "absolute paths are not served\n"};
  // vendor/ holds the npm libraries (uPlot, Chart.js), which live in
  // node_modules, not beside the page: --dashboard-dir takes them from the
  // binary too, so a page served from disk draws its charts.
  if (!root_.empty() && relative.rfind("vendor/", 0) != 0) return from_disk(relative);
  const Asset* a = find_asset(relative);
  if (!a) return {404, "text/plain", "not found\n"};
  return {200, std::string(a->content_type), std::string(a->body)};
}

StaticReply StaticFiles::from_disk(const std::string& relative) const {
  std::error_code ec;
  const fs::path file = fs::canonical(root_ / relative, ec);
  if (ec || !fs::is_regular_file(file)) return {404, "text/plain", "not found\n"};
  // The canonical path must still lie under the root (a symlink may lead out).
  if (std::mismatch(root_.begin(), root_.end(), file.begin(), file.end()).first != root_.end())
    return {403, "text/plain", "outside --dashboard-dir\n"};
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) return {404, "text/plain", "not readable\n"};
  std::ostringstream body;
  body << in.rdbuf();
  return {200, content_type_for(file), body.str()};
}

}  // namespace mddp::dashboard
