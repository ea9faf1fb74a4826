#include "common/xspace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::xspace {
namespace {

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
  EXPECT_EQ(EventStartNs(plane->lines(0), *e), 1'000'500);
  EXPECT_EQ(CountEvents(space), 1);
  EXPECT_TRUE(Validate(space).ok());
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

}  // namespace
}  // namespace profctl::xspace
