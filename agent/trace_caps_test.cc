#include "agent/trace_caps.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xspace/xspace.h"

namespace profctl::agent {
namespace {

using tensorflow::profiler::XLine;
using tensorflow::profiler::XSpace;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A space with one plane whose line i holds the events at the given offsets (ps), in that order.
XSpace SpaceWithLines(const std::vector<std::vector<int64_t>>& lines) {
  XSpace space;
  auto* plane = space.add_planes();
  plane->set_name("/host:CPU");
  for (size_t i = 0; i < lines.size(); ++i) {
    XLine* line = plane->add_lines();
    line->set_id(static_cast<int64_t>(i));
    for (int64_t offset : lines[i]) {
      auto* e = line->add_events();
      e->set_metadata_id(1);
      e->set_offset_ps(offset);
      e->set_duration_ps(10);
    }
  }
  return space;
}

std::vector<int64_t> Offsets(const XSpace& space, int line) {
  std::vector<int64_t> out;
  for (const auto& e : space.planes(0).lines(line).events()) out.push_back(e.offset_ps());
  return out;
}

TEST(TrimToCapsTest, WithinTheCapsNothingChanges) {
  XSpace space = SpaceWithLines({{1, 2, 3}, {4}});
  const XSpace before = space;
  EXPECT_EQ(TrimToCaps({.max_events = 4, .max_bytes = 1 << 20}, &space), 0u);
  EXPECT_EQ(space.SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(space.warnings_size(), 0);
}

TEST(TrimToCapsTest, SmallLinesKeepEverythingBigLinesShareTheRestAndKeepTheirEarliest) {
  // 2 + 10 + 10 events, budget 9: the small line keeps its 2, the two big lines 4 and 3 (the
  // first in line order gets the remainder), each its earliest.
  XSpace space = SpaceWithLines({{5, 6},
                                 {90, 10, 80, 20, 70, 30, 60, 40, 50, 0},  // unsorted
                                 {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}});
  EXPECT_EQ(TrimToCaps({.max_events = 9, .max_bytes = 0}, &space), 13u);
  EXPECT_THAT(Offsets(space, 0), ElementsAre(5, 6));
  EXPECT_THAT(Offsets(space, 1), ElementsAre(10, 20, 30, 0));  // earliest four, original order
  EXPECT_THAT(Offsets(space, 2), ElementsAre(0, 1, 2));
  EXPECT_EQ(xspace::CountEvents(space), 9);
  ASSERT_EQ(space.warnings_size(), 1);
  EXPECT_THAT(space.warnings(0), HasSubstr("dropped 13 of 22 events"));
  EXPECT_THAT(space.warnings(0), HasSubstr("--max-trace-events"));
}

TEST(TrimToCapsTest, TiesAreBrokenByPositionSoTheResultIsDeterministic) {
  XSpace a = SpaceWithLines({{7, 3, 3, 3, 1}});
  XSpace b = a;
  TrimToCaps({.max_events = 3, .max_bytes = 0}, &a);
  TrimToCaps({.max_events = 3, .max_bytes = 0}, &b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_THAT(Offsets(a, 0), ElementsAre(3, 3, 1));
}

TEST(TrimToCapsTest, TheByteCapDropsEventsUntilTheTraceFits) {
  std::vector<int64_t> many(10'000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i) * 1000;
  XSpace space = SpaceWithLines({many, many});
  const size_t before = space.ByteSizeLong();
  const int64_t cap = static_cast<int64_t>(before / 4);
  const uint64_t dropped = TrimToCaps({.max_events = 0, .max_bytes = cap}, &space);
  EXPECT_GT(dropped, 10'000u);
  EXPECT_LE(static_cast<int64_t>(space.ByteSizeLong()), cap);
  EXPECT_EQ(xspace::CountEvents(space), static_cast<int64_t>(20'000 - dropped));
  // Both lines were cut to the same length (give or take the remainder), from their start.
  EXPECT_LE(
      std::abs(space.planes(0).lines(0).events_size() - space.planes(0).lines(1).events_size()), 1);
  EXPECT_EQ(Offsets(space, 0).front(), 0);
  EXPECT_THAT(space.warnings(0), HasSubstr("--max-trace-mb"));
}

TEST(TrimToCapsTest, MetadataOverTheByteCapIsSaidNotLooped) {
  XSpace space = SpaceWithLines({{1, 2}});
  (*space.mutable_planes(0)->mutable_event_metadata())[1].set_name(std::string(10'000, 'm'));
  const uint64_t dropped = TrimToCaps({.max_events = 0, .max_bytes = 1000}, &space);
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(xspace::CountEvents(space), 0);
  EXPECT_THAT(space.warnings(), ::testing::Contains(HasSubstr("its metadata alone is")));
}

}  // namespace
}  // namespace profctl::agent
