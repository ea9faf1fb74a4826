#include "common/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"
#include "tests/fake_clock.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using ::testing::HasSubstr;

TEST(JsonEscape, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonEscape("a\"b\\c\nd\te\x01"), "a\\\"b\\\\c\\nd\\te\\u0001");
  EXPECT_EQ(JsonEscape("h\xc3\xa9llo"), "h\xc3\xa9llo");  // UTF-8 kept
}

// A flood of one kind of line is logged 10 times per 10 s; the next line logged says how many
// were left out, and over how long; another kind is bounded on its own; a quiet kind logs every
// line and says nothing more.
TEST(LogLimiter, BoundsEachKindAndCountsWhatItLeftOut) {
  testkit::FakeClock clock;
  LogLimiter limiter(&clock);
  int logged = 0;
  for (int i = 0; i < 15'416; ++i)
    logged += limiter.Admit("capture rejected ALREADY_EXISTS") ? 1 : 0;
  EXPECT_EQ(logged, 10);
  EXPECT_EQ(limiter.Admit("cancel OK"), "");
  clock.Advance(int64_t{4} * 1'000'000'000);
  EXPECT_EQ(limiter.Admit("capture rejected ALREADY_EXISTS"), std::nullopt);
  clock.Advance(int64_t{6} * 1'000'000'000);
  EXPECT_EQ(limiter.Admit("capture rejected ALREADY_EXISTS"),
            " (15407 more like it not logged in the last 10.0 s)");
  EXPECT_EQ(limiter.Admit("capture rejected ALREADY_EXISTS"), "");
  for (int i = 0; i < 9; ++i) {
    clock.Advance(int64_t{2} * 1'000'000'000);
    EXPECT_EQ(limiter.Admit("cancel OK"), "") << i;  // 10 lines per 10 s, however they come
  }
}

// Kinds are bounded: past max_kinds they are all forgotten (each then logs again).
TEST(LogLimiter, ForgetsEveryKindPastItsBound) {
  testkit::FakeClock clock;
  LogLimiter limiter(&clock, {.burst = 1, .window_ns = 1'000'000'000, .max_kinds = 4});
  EXPECT_TRUE(limiter.Admit("a").has_value());
  EXPECT_FALSE(limiter.Admit("a").has_value());
  for (const char* k : {"b", "c", "d", "e"}) EXPECT_TRUE(limiter.Admit(k).has_value()) << k;
  EXPECT_TRUE(limiter.Admit("a").has_value());  // forgotten when "e" came
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
