// Logging through spdlog, with the process's role and rank in every line.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace mddp::log {

// Call once at start (and again when the rank becomes known):
// lines then read "[12:00:01.123] [rank 2] info: ...". Thread-safe logger.
void init(const std::string& role);
// Sets the level from a name (trace, debug, info, warn, error, off); throws InputError otherwise.
void set_level(const std::string& level);

}  // namespace mddp::log
