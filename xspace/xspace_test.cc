#include "xspace/xspace.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"

using ::profctl::testkit::IsOk;

namespace profctl::xspace {
namespace {

using ::profctl::test_time::kT0;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(XSpaceTest, BuilderInternsNamesAndReaderResolvesThem) {
  XSpace space;
  XPlaneBuilder b(space.add_planes(), 7, kHostPlaneName);
  const int64_t train = b.EventMetadataId("train");
  EXPECT_EQ(b.EventMetadataId("train"), train);
  EXPECT_NE(b.EventMetadataId("other"), train);
  XLine* line = b.AddLine(3, "main", /*timestamp_ns=*/1'000'000);
  XEvent* e = b.AddEvent(line, train, /*start_ns=*/1'000'500, /*duration_ns=*/250);
  b.AddStat(e, b.StatMetadataId(kStatStepNum), int64_t{42});
  b.AddStat(e, b.StatMetadataId(kStatCorrelationId), uint64_t{9});
  b.AddStat(e, b.StatMetadataId("note"), absl::string_view("hi"));

  EXPECT_EQ(e->offset_ps(), 500'000);
  EXPECT_EQ(e->duration_ps(), 250'000);
  const XPlane* plane = FindPlane(space, kHostPlaneName);
  ASSERT_NE(plane, nullptr);
  XPlaneReader r(*plane);
  EXPECT_EQ(r.EventName(*e), "train");
  EXPECT_EQ(r.IntStat(*e, kStatStepNum), 42);
  EXPECT_EQ(r.IntStat(*e, kStatCorrelationId), 9);
  EXPECT_EQ(r.StrStat(*e, "note"), "hi");
  EXPECT_EQ(r.IntStat(*e, "missing"), std::nullopt);
  EXPECT_EQ(ProfileStartNs(space), 0);  // no Task Environment: line timestamps are absolute
  EXPECT_EQ(EventStartNs(ProfileStartNs(space), plane->lines(0), *e), 1'000'500);
  EXPECT_EQ(EventEndNs(ProfileStartNs(space), plane->lines(0), *e), 1'000'750);
  EXPECT_EQ(CountEvents(space), 1);
  EXPECT_THAT(Validate(space), IsOk());
}

// A plane read from a file may number its metadata sparsely ({1, 2, 4}): a builder opened on it
// resolves the names it has and gives new ones ids above all in use (size + 1 would be 4, taken).
TEST(XSpaceTest, BuilderOnAPlaneWithSparseIdsNeverReusesAnId) {
  XPlane plane;
  for (int64_t id : {1, 2, 4}) {
    (*plane.mutable_stat_metadata())[id].set_id(id);
    (*plane.mutable_stat_metadata())[id].set_name(absl::StrCat("stat", id));
    (*plane.mutable_event_metadata())[id].set_id(id);
    (*plane.mutable_event_metadata())[id].set_name(absl::StrCat("event", id));
  }
  XPlaneBuilder b(&plane, 7, "/device:GPU:0", 0);
  EXPECT_EQ(b.StatMetadataId("stat4"), 4);
  EXPECT_EQ(b.EventMetadataId("event2"), 2);
  const int64_t stat = b.StatMetadataId("new stat");
  const int64_t event = b.EventMetadataId("new event");
  EXPECT_EQ(stat, 5);
  EXPECT_EQ(event, 5);
  EXPECT_EQ(plane.stat_metadata().at(4).name(), "stat4");
  EXPECT_EQ(plane.event_metadata().at(4).name(), "event4");
  EXPECT_EQ(plane.stat_metadata().at(5).name(), "new stat");
  EXPECT_EQ(plane.stat_metadata_size(), 4);
}

TEST(XSpaceTest, ValidateNamesTheBadEvent) {
  XSpace space;
  XPlaneBuilder b(space.add_planes(), 1, "/device:GPU:0");
  XLine* line = b.AddLine(7, "Stream #7", 0);
  b.AddEvent(line, b.EventMetadataId("k"), 10, 5);
  XEvent* bad = line->add_events();
  bad->set_metadata_id(999);
  absl::Status s = Validate(space);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("/device:GPU:0"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("event #1"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("999"));

  bad->set_metadata_id(1);
  bad->set_duration_ps(-1);
  EXPECT_THAT(Validate(space).message(), ::testing::HasSubstr("negative"));
  bad->set_duration_ps(1);
  bad->add_stats()->set_metadata_id(55);
  bad->mutable_stats(0)->set_int64_value(1);
  EXPECT_THAT(Validate(space).message(), ::testing::HasSubstr("undefined metadata id 55"));

  XSpace unnamed;
  unnamed.add_planes();
  EXPECT_THAT(Validate(unnamed).message(), ::testing::HasSubstr("has no name"));
}

TEST(XSpaceTest, TheScopeRangeTreesIdPairsAreNotUndefinedStats) {
  // What a JAX 0.11 server sends (tests/data/traces/h200_jax_steps.xplane.pb): plane-level stats
  // keyed by scope range ids (2^48 + n), each holding its parent's id.
  XSpace space;
  XPlane* tree = space.add_planes();
  tree->set_name(std::string(kScopeRangeCallStackPlaneName));
  XStat* pair = tree->add_stats();
  pair->set_metadata_id((int64_t{1} << 48) + 1770);
  pair->set_int64_value((int64_t{1} << 48) + 12);
  EXPECT_THAT(Validate(space), IsOk());
  // Anywhere else such a stat is still undefined, and the tree's events are still checked.
  tree->set_name("/host:CPU");
  EXPECT_THAT(Validate(space).message(), ::testing::HasSubstr("undefined metadata id"));
  tree->set_name(std::string(kScopeRangeCallStackPlaneName));
  tree->add_lines()->add_events()->set_metadata_id(9);
  EXPECT_THAT(Validate(space).message(), ::testing::HasSubstr("undefined metadata id 9"));
}

TEST(XSpaceTest, BuilderWritesLinesRelativeToTheProfileStart) {
  XSpace space;
  const int64_t start = kT0 + 123'456'789;
  XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", start);
  XLine* line = b.AddLine(7, "Stream #7", start + 2'000);
  XEvent* e = b.AddEvent(line, b.EventMetadataId("k"), start + 5'000, 300);
  SetProfileWindow(&space, start, start + 1'000'000'000);

  EXPECT_EQ(line->timestamp_ns(), 2'000);  // what XProf needs: small, relative
  EXPECT_EQ(e->offset_ps(), 3'000'000);
  EXPECT_EQ(ProfileStartNs(space), start);
  EXPECT_EQ(ProfileStopNs(space), start + 1'000'000'000);
  EXPECT_EQ(EventStartNs(ProfileStartNs(space), *line, *e), start + 5'000);
  EXPECT_EQ(EventEndNs(ProfileStartNs(space), *line, *e), start + 5'300);
  EXPECT_EQ(EventDurationNs(*e), 300);
  EXPECT_THAT(Validate(space), IsOk()) << Validate(space);

  // The window is stored as TSL stores it: uint64 stats on the Task Environment plane.
  const XPlane* env = FindPlane(space, kTaskEnvPlaneName);
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(env->id(), kTaskEnvPlaneId);
  ASSERT_EQ(env->stats_size(), 2);
  EXPECT_EQ(env->stats(0).uint64_value(), static_cast<uint64_t>(start));
  EXPECT_EQ(env->stats(1).uint64_value(), static_cast<uint64_t>(start + 1'000'000'000));
}

TEST(XSpaceTest, SetProfileWindowIsIdempotentAndReplacesEarlierValues) {
  XSpace space;
  space.add_planes()->set_name(std::string(kHostPlaneName));
  SetProfileWindow(&space, kT0, kT0 + 10);
  SetProfileWindow(&space, kT0, kT0 + 10);
  SetProfileWindow(&space, kT0 + 1, kT0 + 20);
  int env_planes = 0;
  for (const XPlane& p : space.planes()) env_planes += p.name() == kTaskEnvPlaneName;
  EXPECT_EQ(env_planes, 1);
  const XPlane* env = FindPlane(space, kTaskEnvPlaneName);
  EXPECT_EQ(env->stats_size(), 2);
  EXPECT_EQ(env->stat_metadata_size(), 2);
  EXPECT_EQ(ProfileStartNs(space), kT0 + 1);
  EXPECT_EQ(ProfileStopNs(space), kT0 + 20);

  // An int64 value written earlier (as older profctl agents did) is replaced, not duplicated.
  XSpace old;
  XPlaneBuilder env_old(old.add_planes(), 1000, kTaskEnvPlaneName);
  env_old.AddPlaneStat(env_old.StatMetadataId(kStatProfileStart), kT0);
  SetProfileWindow(&old, kT0 + 5, kT0 + 6);
  EXPECT_EQ(old.planes(0).stats_size(), 2);
  EXPECT_EQ(ProfileStartNs(old), kT0 + 5);
}

TEST(XSpaceTest, FilesWithoutAUint64ProfileStartReadAsAbsolute) {
  // Older profctl files: absolute line timestamps and an int64 profile_start_time.
  XSpace space;
  XPlaneBuilder host(space.add_planes(), 49, kHostPlaneName);
  XLine* line = host.AddLine(1, "main", kT0);
  XEvent* e = host.AddEvent(line, host.EventMetadataId("train"), kT0 + 700, 100);
  XPlaneBuilder env(space.add_planes(), 1000, kTaskEnvPlaneName);
  env.AddPlaneStat(env.StatMetadataId(kStatProfileStart), kT0);
  env.AddPlaneStat(env.StatMetadataId(kStatProfileStop), kT0 + 1000);

  EXPECT_EQ(ProfileStartNs(space), 0);
  EXPECT_EQ(ProfileStopNs(space), std::nullopt);
  EXPECT_EQ(EventStartNs(ProfileStartNs(space), *line, *e), kT0 + 700);
  EXPECT_EQ(EventEndNs(ProfileStartNs(space), *line, *e), kT0 + 800);
  // They read right here but XProf cannot read them: Validate says so, naming the line.
  const absl::Status s = Validate(space);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("line 1 'main' timestamp_ns 1767225600000000000"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("relative to the profile start"));
}

TEST(XSpaceTest, SubNanosecondOffsetsRoundDown) {
  XSpace space;
  XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
  XLine* line = b.AddLine(1, "s", kT0);
  XEvent* e = b.AddEvent(line, b.EventMetadataId("k"), kT0, 0);
  e->set_offset_ps(1'999);
  e->set_duration_ps(1'500);
  EXPECT_EQ(EventStartNs(kT0, *line, *e), kT0 + 1);
  EXPECT_EQ(EventEndNs(kT0, *line, *e), kT0 + 3);
  line->set_timestamp_ns(-5);  // before the profile start
  e->set_offset_ps(1'000);
  EXPECT_EQ(EventStartNs(kT0, *line, *e), kT0 - 4);
}

TEST(XSpaceTest, ValidateRejectsTimesThatOverflow) {
  auto make = [](int64_t line_ts, int64_t offset_ps, int64_t duration_ps) {
    XSpace space;
    XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0");
    XLine* line = b.AddLine(3, "Stream #3", 0);
    XEvent* e = b.AddEvent(line, b.EventMetadataId("k"), 0, 0);
    line->set_timestamp_ns(line_ts);
    e->set_offset_ps(offset_ps);
    e->set_duration_ps(duration_ps);
    return space;
  };
  EXPECT_THAT(Validate(make(1'000, 5'000, 7'000)), IsOk());
  // timestamp_ns * 1000 alone overflows.
  EXPECT_THAT(Validate(make(kInt64Max / 1000 + 1, 0, 0)).message(),
              ::testing::HasSubstr("timestamp_ns 9223372036854776"));
  // timestamp_ns * 1000 fits, + offset_ps does not.
  XSpace off = make(kInt64Max / 1000, kInt64Max / 2, 0);
  EXPECT_THAT(Validate(off).message(), ::testing::HasSubstr("offset_ps 4611686018427387903"));
  EXPECT_THAT(Validate(off).message(), ::testing::HasSubstr("overflows int64 picoseconds"));
  // Start fits, end (+ duration_ps) does not.
  EXPECT_THAT(Validate(make(0, kInt64Max - 10, 11)).message(),
              ::testing::HasSubstr("duration_ps 11) overflows"));

  // A profile start that does not fit int64 ns.
  XSpace huge = make(0, 0, 0);
  XPlaneBuilder env(huge.add_planes(), 1000, kTaskEnvPlaneName);
  env.AddPlaneStat(env.StatMetadataId(kStatProfileStart), uint64_t{1} << 63);
  EXPECT_THAT(Validate(huge).message(),
              ::testing::HasSubstr("profile_start_time 9223372036854775808 ns does not fit"));
  EXPECT_EQ(ProfileStartNs(huge), kInt64Max);

  // A valid profile start whose events end past int64 ns.
  XSpace late = make(2'000'000, 0, 0);
  SetProfileWindow(&late, kInt64Max - 1'000'000, kInt64Max);
  EXPECT_THAT(Validate(late).message(), ::testing::HasSubstr("ends past int64 nanoseconds"));
  // The helpers saturate instead of overflowing.
  const XLine& line = late.planes(0).lines(0);
  EXPECT_EQ(EventStartNs(ProfileStartNs(late), line, line.events(0)), kInt64Max);
  EXPECT_EQ(EventEndNs(std::numeric_limits<int64_t>::min(), line, line.events(0)),
            std::numeric_limits<int64_t>::min() + 2'000'000);
}

}  // namespace
}  // namespace profctl::xspace
