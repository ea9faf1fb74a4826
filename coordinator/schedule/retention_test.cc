#include "coordinator/schedule/retention.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/session/session_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"
#include "tests/test_time.h"

namespace profctl::coordinator::schedule {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using ::profctl::test_time::kHour;
constexpr int64_t kNow = int64_t{1'767'225'600} * 1'000'000'000 + 100 * kHour;

// Sessions s0 (oldest) .. s<n-1> (newest), one hour apart, ending an hour before kNow.
std::vector<SessionFolder> Sessions(int n, int64_t bytes = 10) {
  std::vector<SessionFolder> out;
  for (int i = n - 1; i >= 0; --i) {  // unsorted on purpose
    out.push_back({absl::StrCat("s", i), kNow - (n - i) * kHour, bytes, false});
  }
  return out;
}

TEST(PlanRetentionTest, NoLimitsKeepsEverything) {
  EXPECT_THAT(PlanRetention(Sessions(5), RetentionConfig{}, kNow), IsEmpty());
}

TEST(PlanRetentionTest, KeepLast) {
  EXPECT_THAT(PlanRetention(Sessions(5), {.keep_last = 3}, kNow), ElementsAre("s0", "s1"));
  EXPECT_THAT(PlanRetention(Sessions(2), {.keep_last = 3}, kNow), IsEmpty());
}

TEST(PlanRetentionTest, MaxAge) {
  // Ages: s0 5h, s1 4h, s2 3h, s3 2h, s4 1h.
  EXPECT_THAT(PlanRetention(Sessions(5), {.max_age_ns = 3 * kHour + 1}, kNow),
              ElementsAre("s0", "s1"));
  // The newest is kept even when too old.
  EXPECT_THAT(PlanRetention(Sessions(3), {.max_age_ns = kHour / 2}, kNow), ElementsAre("s0", "s1"));
}

TEST(PlanRetentionTest, MaxBytesOldestFirstNeverTheNewest) {
  EXPECT_THAT(PlanRetention(Sessions(5, 10), {.max_bytes = 25}, kNow),
              ElementsAre("s0", "s1", "s2"));
  EXPECT_THAT(PlanRetention(Sessions(3, 100), {.max_bytes = 25}, kNow), ElementsAre("s0", "s1"));
}

TEST(PlanRetentionTest, RunningIsNeverDeletedNorCountedByKeepLast) {
  std::vector<SessionFolder> s = Sessions(4);
  s.push_back({"old-running", kNow - 50 * kHour, 1000, true});
  EXPECT_THAT(PlanRetention(s, {.keep_last = 2}, kNow), ElementsAre("s0", "s1"));
  // Its bytes count: everything finished but the newest goes.
  EXPECT_THAT(PlanRetention(s, {.max_bytes = 1015}, kNow), ElementsAre("s0", "s1", "s2"));
  EXPECT_THAT(PlanRetention(s, {.max_age_ns = kHour}, kNow), ElementsAre("s0", "s1", "s2"));
}

TEST(PlanRetentionTest, LimitsCombine) {
  EXPECT_THAT(PlanRetention(Sessions(6, 10),
                            {.keep_last = 5, .max_age_ns = 10 * kHour, .max_bytes = 35}, kNow),
              ElementsAre("s0", "s1", "s2"));
}

TEST(ScheduledSessionTimeTest, Names) {
  const int64_t t = int64_t{1'767'225'600} * 1'000'000'000;
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly_20260101T000000Z"), t);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly_20260101T000000Z_2"), t);
  EXPECT_EQ(ScheduledSessionTime("a", "a_b_20260101T000000Z"), std::nullopt);
  EXPECT_EQ(ScheduledSessionTime("a_b", "a_b_20260101T000000Z"), t);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourlyx_20260101T000000Z"), std::nullopt);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly_20260101T000000Z_"), std::nullopt);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly_20260101T000000Zx"), std::nullopt);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly_2026010XT000000Z"), std::nullopt);
  EXPECT_EQ(ScheduledSessionTime("hourly", "hourly"), std::nullopt);
}

void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(ApplyRetentionTest, DeletesOnlyFinishedSessionsOfTheSchedule) {
  profctl::testkit::TempDir tmp;
  const std::filesystem::path root = std::filesystem::path(tmp.path()) / "plugins/profile";
  const std::string ok = R"({"status": "SESSION_STATUS_OK"})";
  WriteFile(root / "hourly_20260101T000000Z/session.json", ok);
  WriteFile(root / "hourly_20260101T000000Z/h.xplane.pb", std::string(1000, 'x'));
  WriteFile(root / "hourly_20260101T010000Z/session.json",
            R"({"status": "SESSION_STATUS_PARTIAL"})");
  // RUNNING with no live owner (killed, or its final write failed on a full disk): abandoned,
  // so finished.
  WriteFile(root / "hourly_20260101T020000Z/session.json",
            R"({"status": "SESSION_STATUS_RUNNING"})");
  WriteFile(root / "hourly_20260101T020000Z/.profctl_running", "");
  // A live capture (this process holds its marker's lock), whatever its session.json says.
  absl::StatusOr<std::unique_ptr<RunningSession>> live =
      RunningSession::Open(tmp.path(), "hourly_20260101T030000Z", {});
  ASSERT_TRUE(live.ok()) << live.status();
  WriteFile(root / "hourly_20260101T030000Z/session.json", ok);
  WriteFile(root / "hourly_20260101T040000Z/h.xplane.pb", "no manifest yet");
  WriteFile(root / "hourly_20260101T050000Z/session.json", ok);
  WriteFile(root / "hourly_20260101T060000Z/session.json", ok);
  WriteFile(root / "daily_20250101T000000Z/session.json", ok);
  WriteFile(root / "manual-session/session.json", ok);

  const RetentionResult r = ApplyRetention(tmp.path(), "hourly", {.keep_last = 2}, kNow);
  EXPECT_THAT(r.errors, IsEmpty());
  EXPECT_THAT(r.deleted, ElementsAre("hourly_20260101T000000Z", "hourly_20260101T010000Z",
                                     "hourly_20260101T020000Z"));
  EXPECT_GE(r.bytes_freed, 1000);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    left.push_back(e.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_THAT(left, ElementsAre("daily_20250101T000000Z", "hourly_20260101T030000Z",
                                "hourly_20260101T040000Z", "hourly_20260101T050000Z",
                                "hourly_20260101T060000Z", "manual-session"));
}

TEST(ApplyRetentionTest, MissingLogDirDeletesNothing) {
  const RetentionResult r =
      ApplyRetention("/nonexistent/profctl", "hourly", {.keep_last = 1}, kNow);
  EXPECT_THAT(r.deleted, IsEmpty());
  EXPECT_THAT(r.errors, IsEmpty());
}

}  // namespace
}  // namespace profctl::coordinator::schedule
