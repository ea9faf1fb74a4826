#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace profctl {

absl::Status SetupLogging(const std::string& program, const std::string& level) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: expected trace, debug, info, warn, error or off, got '", level, "'"));
  }
  auto logger = spdlog::stderr_color_mt(program);
  logger->set_pattern("%^[%Y-%m-%d %H:%M:%S.%e %n %l]%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace profctl
