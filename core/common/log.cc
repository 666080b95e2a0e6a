#include "core/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/common/check.h"

namespace mddp::log {

void init(const std::string& role) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("mddp", sink);
  logger->set_pattern("[%H:%M:%S.%e] [" + role + "] %^%l%$: %v");
  spdlog::set_default_logger(logger);
}

void set_level(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw InputError("unknown log level '" + level +
                     "' (use trace, debug, info, warn, error or off)");
  spdlog::set_level(lvl);
}

}  // namespace mddp::log
