// The dashboard page compiled into the binary: every file of dashboard/web/
// plus uPlot's script and stylesheet and Chart.js's script from npm (dashboard/assets/ generates
// the table at build time; see dashboard/assets/README.md).
#pragma once

#include <span>
#include <string_view>

namespace mddp::dashboard {

struct Asset {
  std::string_view path;  // relative, no leading slash: "index.html", "vendor/uPlot.iife.min.js"
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;          // the file's bytes (static storage)
};

// The asset at `path` ("index.html", "app.js", "vendor/uPlot.min.css"; no
// leading slash, exact match), or nullptr. Thread-safe.
const Asset* find_asset(std::string_view path);

// All assets, sorted by path, for listing. Thread-safe.
std::span<const Asset> all_assets();

}  // namespace mddp::dashboard
