#include "xspace/xspace_merge.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xspace/xspace.h"

namespace profctl::xspace {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAreArray;

// A stat as a person reads it: name=value, a ref resolved to the name it refers to.
std::string StatText(const XPlane& plane, const XStat& s) {
  auto name = [&](int64_t id) -> std::string {
    auto it = plane.stat_metadata().find(id);
    return it == plane.stat_metadata().end() ? "<undefined>" : it->second.name();
  };
  std::string value;
  switch (s.value_case()) {
    case XStat::kInt64Value:
      value = absl::StrCat("i", s.int64_value());
      break;
    case XStat::kUint64Value:
      value = absl::StrCat("u", s.uint64_value());
      break;
    case XStat::kStrValue:
      value = absl::StrCat("s", s.str_value());
      break;
    case XStat::kRefValue:
      value = absl::StrCat("ref:", name(static_cast<int64_t>(s.ref_value())));
      break;
    default:
      value = "?";
  }
  return absl::StrCat(name(s.metadata_id()), "=", value);
}

std::string StatsText(const XPlane& plane, const google::protobuf::RepeatedPtrField<XStat>& stats) {
  std::vector<std::string> parts;
  for (const XStat& s : stats) parts.push_back(StatText(plane, s));
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ",");
}

// Every event of `plane` as "line|event name[metadata stats]|start|duration|stats", times absolute.
std::vector<std::string> Events(const XPlane& plane, int64_t profile_start = 0) {
  std::vector<std::string> out;
  for (const XLine& line : plane.lines()) {
    for (const XEvent& e : line.events()) {
      auto md = plane.event_metadata().find(e.metadata_id());
      const std::string name =
          md == plane.event_metadata().end()
              ? "<undefined>"
              : absl::StrCat(md->second.name(), "[", StatsText(plane, md->second.stats()), "]");
      out.push_back(absl::StrCat(line.name(), "|", name, "|", EventStartNs(profile_start, line, e),
                                 "|", e.duration_ps(), "|", StatsText(plane, e.stats())));
    }
  }
  return out;
}

XStat* AddStat(google::protobuf::RepeatedPtrField<XStat>* stats, int64_t id) {
  XStat* s = stats->Add();
  s->set_metadata_id(id);
  return s;
}

void DefineStat(XPlane* plane, int64_t id, const std::string& name) {
  XStatMetadata& md = (*plane->mutable_stat_metadata())[id];
  md.set_id(id);
  md.set_name(name);
}

XEventMetadata* DefineEvent(XPlane* plane, int64_t id, const std::string& name) {
  XEventMetadata& md = (*plane->mutable_event_metadata())[id];
  md.set_id(id);
  md.set_name(name);
  return &md;
}

XEvent* AddEvent(XLine* line, int64_t metadata_id, int64_t offset_ps, int64_t duration_ps) {
  XEvent* e = line->add_events();
  e->set_metadata_id(metadata_id);
  e->set_offset_ps(offset_ps);
  e->set_duration_ps(duration_ps);
  return e;
}

XLine* AddLine(XPlane* plane, int64_t id, const std::string& name, int64_t ts,
               int64_t display_id = 0) {
  XLine* line = plane->add_lines();
  line->set_id(id);
  line->set_display_id(display_id);
  line->set_name(name);
  line->set_timestamp_ns(ts);
  return line;
}

// Ours: a host plane as the synthetic collector writes one.
XPlane OurHostPlane() {
  XPlane p;
  p.set_id(49);
  p.set_name("/host:CPU");
  DefineStat(&p, 1, "step_num");
  DefineStat(&p, 2, "tf_op");
  DefineStat(&p, 3, "device_vendor");
  DefineEvent(&p, 1, "train");
  XEventMetadata* matmul = DefineEvent(&p, 2, "matmul");
  AddStat(matmul->mutable_stats(), 2)->set_str_value("dense/MatMul:MatMul");
  AddStat(p.mutable_stats(), 3)->set_str_value("ours");
  XLine* t10 = AddLine(&p, 10, "python3 10", 1000);
  AddStat(AddEvent(t10, 1, 0, 5000)->mutable_stats(), 1)->set_int64_value(7);
  AddEvent(t10, 2, 1000, 1000);
  AddLine(&p, 11, "python3 11", 2000, /*display_id=*/20);
  AddEvent(p.mutable_lines(1), 1, 0, 1000);
  return p;
}

// Theirs: the same plane name, ids that collide with different meanings.
XPlane TheirHostPlane() {
  XPlane p;
  p.set_id(49);
  p.set_name("/host:CPU");
  DefineStat(&p, 1, "tf_op");
  DefineStat(&p, 2, "hlo_op");
  DefineStat(&p, 3, "step_num");
  DefineStat(&p, 4, "fusion.7");  // interned string for a ref value
  DefineStat(&p, 5, "device_vendor");
  DefineStat(&p, 6, "cores");
  DefineEvent(&p, 1, "IteratorGetNext");
  DefineEvent(&p, 2, "train");
  XEventMetadata* fusion = DefineEvent(&p, 3, "XlaLaunch");
  AddStat(fusion->mutable_stats(), 2)->set_ref_value(4);
  fusion->add_child_id(1);
  AddStat(p.mutable_stats(), 5)->set_str_value("theirs");  // ours wins
  AddStat(p.mutable_stats(), 6)->set_int64_value(96);      // appended
  XLine* a = AddLine(&p, 10, "tf_data 10", 500);           // collides with our 10
  AddEvent(a, 1, 0, 300);
  AddStat(AddEvent(a, 2, 400, 900)->mutable_stats(), 3)->set_int64_value(8);
  XLine* b = AddLine(&p, 20, "xla 20", 600);  // collides with our display id 20
  AddStat(AddEvent(b, 3, 0, 700)->mutable_stats(), 2)->set_ref_value(4);
  AddStat(b->mutable_events(0)->mutable_stats(), 1)->set_str_value("jit/f:XlaLaunch");
  XLine* c = AddLine(&p, 30, "main 30", 700);  // free
  AddEvent(c, 99, 0, 10);                      // undefined in the source
  return p;
}

TEST(XSpaceMergeTest, MergedPlaneKeepsEveryEventNameStatAndTime) {
  XPlane ours = OurHostPlane();
  XPlane theirs = TheirHostPlane();
  std::vector<std::string> expected = Events(ours);
  for (const std::string& e : Events(theirs)) expected.push_back(e);

  MergePlaneInto(&theirs, &ours);

  EXPECT_EQ(ours.id(), 49);
  EXPECT_EQ(ours.name(), "/host:CPU");
  EXPECT_THAT(Events(ours), UnorderedElementsAreArray(expected));
  EXPECT_EQ(theirs.lines_size(), 0);
  // Line ids and display ids are unique; names and the free line's id are kept.
  absl::flat_hash_set<int64_t> ids;
  std::vector<std::string> names;
  for (const XLine& line : ours.lines()) {
    EXPECT_TRUE(ids.insert(line.id()).second) << line.name();
    if (line.display_id() != 0 && line.display_id() != line.id()) {
      EXPECT_TRUE(ids.insert(line.display_id()).second) << line.name();
    }
    names.push_back(absl::StrCat(line.name(), "#", line.id()));
  }
  EXPECT_THAT(names, ElementsAre("python3 10#10", "python3 11#11", "tf_data 10#21", "xla 20#22",
                                 "main 30#30"));
  // Plain metadata with the same name is shared; stat metadata is one entry per name.
  int trains = 0;
  for (const auto& [id, md] : ours.event_metadata()) trains += md.name() == "train" ? 1 : 0;
  EXPECT_EQ(trains, 1);
  absl::flat_hash_set<std::string> stat_names;
  for (const auto& [id, md] : ours.stat_metadata()) {
    EXPECT_EQ(id, md.id());
    EXPECT_TRUE(stat_names.insert(md.name()).second) << md.name();
  }
  // The event metadata's child id follows its event metadata.
  for (const auto& [id, md] : ours.event_metadata()) {
    EXPECT_EQ(id, md.id());
    if (md.name() == "XlaLaunch") {
      ASSERT_EQ(md.child_id_size(), 1);
      EXPECT_EQ(ours.event_metadata().at(md.child_id(0)).name(), "IteratorGetNext");
    }
  }
  // Plane stats: ours win on a shared name, theirs are added otherwise.
  EXPECT_EQ(StatsText(ours, ours.stats()), "cores=i96,device_vendor=sours");
}

TEST(XSpaceMergeTest, AddOrMergePlaneAppendsNewNamesWithAFreeIdAndMergesKnownOnes) {
  XSpace space;
  *space.add_planes() = OurHostPlane();
  XPlane* gpu = space.add_planes();
  gpu->set_id(0);
  gpu->set_name("/device:GPU:0");

  XPlane tpu;
  tpu.set_id(49);  // taken by the host plane
  tpu.set_name("/device:TPU:0");
  DefineEvent(&tpu, 1, "fusion.1");
  AddEvent(AddLine(&tpu, 1, "XLA Ops", 0), 1, 0, 10);
  AddOrMergePlane(&tpu, &space);
  ASSERT_EQ(space.planes_size(), 3);
  EXPECT_EQ(space.planes(2).name(), "/device:TPU:0");
  EXPECT_EQ(space.planes(2).id(), 50);
  EXPECT_THAT(Events(space.planes(2)), ElementsAre("XLA Ops|fusion.1[]|0|10|"));

  XPlane gpu2;
  gpu2.set_id(7);  // free, so it would be kept if this were a new plane
  gpu2.set_name("/device:GPU:0");
  DefineEvent(&gpu2, 1, "kernel");
  AddEvent(AddLine(&gpu2, 5, "Stream #5(Compute)", 0), 1, 0, 10);
  AddOrMergePlane(&gpu2, &space);
  ASSERT_EQ(space.planes_size(), 3);
  EXPECT_EQ(space.planes(1).id(), 0);
  EXPECT_THAT(Events(space.planes(1)), ElementsAre("Stream #5(Compute)|kernel[]|0|10|"));
}

// Two framework servers' scope-range trees (JAX writes one per process): their plane stats are
// scope id -> parent id pairs with no metadata, kept as they are (a remap would renumber the
// ids into metadata ids and lose the tree).
TEST(XSpaceMergeTest, ScopeRangeTreesKeepTheirIdPairs) {
  XSpace space;
  auto tree = [](int64_t id, int64_t parent) {
    XPlane p;
    p.set_name(std::string(kScopeRangeCallStackPlaneName));
    XStat* s = p.add_stats();
    s->set_metadata_id(id);
    s->set_int64_value(parent);
    return p;
  };
  constexpr int64_t kScope = int64_t{1} << 48;
  XPlane first = tree(kScope + 5, kScope + 1);
  XPlane second = tree(kScope + 9, kScope + 5);
  AddOrMergePlane(&first, &space);
  AddOrMergePlane(&second, &space);
  ASSERT_EQ(space.planes_size(), 1);
  const XPlane& merged = space.planes(0);
  ASSERT_EQ(merged.stats_size(), 2);
  EXPECT_EQ(merged.stats(0).metadata_id(), kScope + 5);
  EXPECT_EQ(merged.stats(1).metadata_id(), kScope + 9);
  EXPECT_EQ(merged.stats(1).int64_value(), kScope + 5);
  EXPECT_TRUE(merged.stat_metadata().empty());
  EXPECT_TRUE(Validate(space).ok());
}

TEST(XSpaceMergeTest, MergeDuplicatePlanesKeepsTheFirstOfEachName) {
  XSpace space;
  *space.add_planes() = OurHostPlane();
  space.add_planes()->set_name("Task Environment");
  *space.add_planes() = TheirHostPlane();
  std::vector<std::string> expected = Events(space.planes(0));
  for (const std::string& e : Events(space.planes(2))) expected.push_back(e);

  EXPECT_EQ(MergeDuplicatePlanes(&space), 1);
  ASSERT_EQ(space.planes_size(), 2);
  EXPECT_EQ(space.planes(0).name(), "/host:CPU");
  EXPECT_EQ(space.planes(1).name(), "Task Environment");
  EXPECT_THAT(Events(space.planes(0)), UnorderedElementsAreArray(expected));
  EXPECT_EQ(MergeDuplicatePlanes(&space), 0);
}

}  // namespace
}  // namespace profctl::xspace
