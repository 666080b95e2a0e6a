// The HTML report of `microddp analyze`: one self-contained file (uPlot's
// script and stylesheet inlined from the dashboard's embedded assets, the
// analysis as JSON) that opens in any browser without a server or network.
#pragma once

#include <string>

#include "core/perf/analysis.h"

namespace mddp::cli {

// The report's HTML text.
std::string analysis_report_html(const perf::Analysis& a);

// Writes it to `path`; throws mddp::Error naming the path when it cannot.
void write_analysis_report(const perf::Analysis& a, const std::string& path);

}  // namespace mddp::cli
