#include "common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using ::testing::HasSubstr;

TEST(JsonEscape, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonEscape("a\"b\\c\nd\te\x01"), "a\\\"b\\\\c\\nd\\te\\u0001");
  EXPECT_EQ(JsonEscape("h\xc3\xa9llo"), "h\xc3\xa9llo");  // UTF-8 kept
}

TEST(SetupLogging, RefusesUnknownLevelsAndFormats) {
  EXPECT_THAT(SetupLogging("t", "loud").message(), HasSubstr("--log-level"));
  EXPECT_THAT(SetupLogging("t", "info", "xml").message(), HasSubstr("--log-format"));
}

TEST(SetupLogging, JsonFormatWritesOneEscapedObjectPerLine) {
  char path[] = "/tmp/profctl_log_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  ASSERT_THAT(SetupLogging("unit", "info", "json"), IsOk());
  spdlog::info("say \"hi\"\nthen {}", 42);
  spdlog::debug("not at info");
  spdlog::default_logger()->flush();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  absl::StatusOr<std::string> text = ReadFile(path);
  unlink(path);
  ASSERT_THAT(text, IsOk());
  // {"time":"2026-11-23T05:15:45.004974Z","level":"info",...}: one line, UTC, escaped.
  EXPECT_THAT(*text, ::testing::StartsWith(R"({"time":")"));
  EXPECT_THAT(
      *text, ::testing::EndsWith(R"(Z","level":"info","logger":"unit","msg":"say \"hi\"\nthen 42"})"
                                 "\n"));
  EXPECT_EQ(std::count(text->begin(), text->end(), '\n'), 1);
  ASSERT_THAT(SetupLogging("unit", "info", "text"), IsOk());  // leave a normal logger behind
}

}  // namespace
}  // namespace profctl
