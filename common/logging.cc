#include "common/logging.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace profctl {
namespace {

// %* in a pattern: the message, JSON-escaped.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    const std::string escaped =
        JsonEscape(absl::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

std::string JsonEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

LogLimiter::LogLimiter(const Clock* clock, Options options) : clock_(clock), options_(options) {}

std::optional<std::string> LogLimiter::Admit(absl::string_view kind) {
  const int64_t now = clock_->MonoNs();
  absl::MutexLock lock(&mu_);
  if (kinds_.size() >= options_.max_kinds && !kinds_.contains(kind)) kinds_.clear();
  Kind& k = kinds_[kind];
  if (k.logged == 0 || now - k.window_start_mono >= options_.window_ns) {
    k.window_start_mono = now;
    k.logged = 0;
  }
  if (k.logged >= options_.burst) {
    if (k.left_out++ == 0) k.left_out_since_mono = now;
    return std::nullopt;
  }
  ++k.logged;
  if (k.left_out == 0) return std::string();
  std::string note = absl::StrFormat(" (%d more like it not logged in the last %.1f s)", k.left_out,
                                     static_cast<double>(now - k.left_out_since_mono) / 1e9);
  k.left_out = 0;
  return note;
}

absl::Status SetupLogging(const std::string& program, const std::string& level,
                          const std::string& format) {
  const spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: expected trace, debug, info, warn, error or off, got '", level, "'"));
  }
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: expected text or json, got '", format, "'"));
  }
  spdlog::drop(program);
  auto logger =
      format == "json" ? spdlog::stderr_logger_mt(program) : spdlog::stderr_color_mt(program);
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(
        spdlog::pattern_time_type::utc, std::string(spdlog::details::os::default_eol));
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%^[%Y-%m-%d %H:%M:%S.%e %n %l]%$ %v");
  }
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace profctl
