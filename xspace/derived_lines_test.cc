#include "xspace/derived_lines.h"

#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"

namespace profctl::xspace {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using ::profctl::test_time::kT0;

// A host with step roots and launches, and GPU 0 with kernels on two streams.
class Trace {
 public:
  Trace()
      : host_(space_.add_planes(), 49, kHostPlaneName, kT0),
        gpu_(space_.add_planes(), 0, "/device:GPU:0", kT0) {
    SetProfileWindow(&space_, kT0, kT0 + 1'000'000);
    thread_ = host_.AddLine(1, "main", kT0);
    launcher_ = host_.AddLine(2, "launcher", kT0);
    stream7_ = gpu_.AddLine(7, "Stream #7(Compute)", kT0);
    stream8_ = gpu_.AddLine(8, "Stream #8(Compute,MemcpyH2D)", kT0);
  }
  void Step(int64_t n, int64_t start, int64_t end) {
    XEvent* e = host_.AddEvent(thread_, host_.EventMetadataId("train"), kT0 + start, end - start);
    host_.AddStat(e, host_.StatMetadataId(kStatIsRoot), int64_t{1});
    host_.AddStat(e, host_.StatMetadataId(kStatStepNum), n);
  }
  // A kernel on stream 7 (or 8) with an optional launch at `launch` (host time).
  void Kernel(absl::string_view name, int64_t start, int64_t end, absl::string_view tf_op,
              absl::string_view hlo_op = "", int64_t launch = -1, bool stream8 = false) {
    XEvent* e = gpu_.AddEvent(stream8 ? stream8_ : stream7_, gpu_.EventMetadataId(name),
                              kT0 + start, end - start);
    if (!tf_op.empty()) gpu_.AddStat(e, gpu_.StatMetadataId("tf_op"), tf_op);
    if (!hlo_op.empty()) {
      // As TSL writes repeated strings: a ref to a stat metadata named by the value.
      XStat* s = e->add_stats();
      s->set_metadata_id(gpu_.StatMetadataId("hlo_op"));
      s->set_ref_value(static_cast<uint64_t>(gpu_.StatMetadataId(hlo_op)));
    }
    if (launch >= 0) {
      ++corr_;
      gpu_.AddStat(e, gpu_.StatMetadataId(kStatCorrelationId), corr_);
      XEvent* l =
          host_.AddEvent(launcher_, host_.EventMetadataId("cudaLaunchKernel"), kT0 + launch, 1);
      host_.AddStat(l, host_.StatMetadataId(kStatCorrelationId), corr_);
    }
  }
  const XSpace& space() const { return space_; }
  XSpace* mutable_space() { return &space_; }
  const XPlane& gpu() const { return space_.planes(1); }

 private:
  XSpace space_;
  XPlaneBuilder host_;
  XPlaneBuilder gpu_;
  XLine* thread_;
  XLine* launcher_;
  XLine* stream7_;
  XLine* stream8_;
  uint64_t corr_ = 0;
};

// (name, start, end, step) relative to kT0, step -1 for none.
using Row = std::tuple<std::string, int64_t, int64_t, int64_t>;
std::vector<Row> Rows(const DerivedLine& line) {
  std::vector<Row> rows;
  for (const DerivedEvent& e : line.events) {
    rows.emplace_back(std::string(e.name), e.start_ns - kT0, e.end_ns - kT0, e.step.value_or(-1));
  }
  return rows;
}

TEST(DerivedLinesTest, ConsecutiveKernelsOfOneOpMergeWithinAStep) {
  Trace t;
  t.Step(1, 0, 1000);
  t.Step(2, 1000, 2000);
  t.Kernel("gemm", 100, 200, "model/dense/MatMul:MatMul");
  t.Kernel("gemm2", 250, 300, "model/dense/MatMul:MatMul");  // same op: extends it
  t.Kernel("gelu", 300, 400, "model/gelu/Gelu:Gelu");
  t.Kernel("gemm", 500, 600, "model/dense/MatMul:MatMul");  // after another op: a new event
  // Launched in step 1, runs in step 2's host time: still step 1's (by its launch).
  t.Kernel("gemm", 990, 1100, "model/dense/MatMul:MatMul", "", /*launch=*/950);
  // The same op, but step 2 (no launch: its own start): a new event.
  t.Kernel("gemm", 1100, 1200, "model/dense/MatMul:MatMul");
  const std::vector<DerivedLine> lines = DerivedLinesBuilder(t.space()).Derive(t.gpu());
  ASSERT_EQ(lines.size(), 2u);  // no hlo_op: no XLA Ops
  EXPECT_EQ(lines[0].id, kStepsLineId);
  EXPECT_EQ(lines[0].name, "Steps");
  EXPECT_THAT(Rows(lines[0]),
              ElementsAre(Row{"step 1", 100, 1100, 1}, Row{"step 2", 1100, 1200, 2}));
  EXPECT_EQ(lines[1].id, kTfOpsLineId);
  EXPECT_EQ(lines[1].name, "TensorFlow Ops");
  EXPECT_THAT(Rows(lines[1]), ElementsAre(Row{"model/dense/MatMul:MatMul", 100, 300, 1},
                                          Row{"model/gelu/Gelu:Gelu", 300, 400, 1},
                                          Row{"model/dense/MatMul:MatMul", 500, 1100, 1},
                                          Row{"model/dense/MatMul:MatMul", 1100, 1200, 2}));
}

TEST(DerivedLinesTest, OverlappingStreamsNestAndNeverPartlyOverlap) {
  Trace t;
  t.Kernel("a", 100, 400, "m/A:A");
  t.Kernel("b", 200, 300, "m/B:B", "", -1, /*stream8=*/true);  // inside A: nests
  t.Kernel("c", 350, 500, "m/C:C", "", -1, /*stream8=*/true);  // partly over A: clipped
  t.Kernel("d", 420, 450, "m/C:C");  // inside C (stream 7), same op: C is extended, no new event
  const std::vector<DerivedLine> lines = DerivedLinesBuilder(t.space()).Derive(t.gpu());
  ASSERT_EQ(lines.size(), 1u);  // no steps, no hlo_op
  EXPECT_THAT(Rows(lines[0]), ElementsAre(Row{"m/A:A", 100, 400, -1}, Row{"m/B:B", 200, 300, -1},
                                          Row{"m/C:C", 400, 500, -1}));
}

TEST(DerivedLinesTest, XlaOpsFromHloOpRefsAndCopiesOnlyInSteps) {
  Trace t;
  t.Step(5, 0, 1000);
  t.Kernel("fusion.1", 100, 200, "", "fusion.1");
  t.Kernel("fusion.1", 200, 250, "", "fusion.1");
  t.Kernel("MemcpyHToD", 50, 90, "", "copy.2");  // a copy: steps only
  t.Kernel("fusion.2", 260, 300, "", "fusion.2");
  const std::vector<DerivedLine> lines = DerivedLinesBuilder(t.space()).Derive(t.gpu());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(Rows(lines[0]), ElementsAre(Row{"step 5", 50, 300, 5}));
  EXPECT_EQ(lines[1].id, kXlaOpsLineId);
  EXPECT_EQ(lines[1].name, "XLA Ops");
  EXPECT_THAT(Rows(lines[1]),
              ElementsAre(Row{"fusion.1", 100, 250, 5}, Row{"fusion.2", 260, 300, 5}));
}

TEST(DerivedLinesTest, NothingWithoutAnnotationsOrWhenAlreadyDerived) {
  Trace t;
  t.Kernel("k", 100, 200, "");
  EXPECT_THAT(DerivedLinesBuilder(t.space()).Derive(t.gpu()), IsEmpty());

  Trace u;
  u.Step(1, 0, 1000);
  u.Kernel("k", 100, 200, "m/A:A");
  EXPECT_EQ(AddDerivedLines(u.mutable_space()), 2);  // step 1, m/A:A
  const XPlane& gpu = u.gpu();
  ASSERT_EQ(gpu.lines_size(), 4);
  EXPECT_EQ(gpu.lines(2).id(), kStepsLineId);
  EXPECT_EQ(gpu.lines(2).name(), "Steps");
  EXPECT_EQ(gpu.lines(3).id(), kTfOpsLineId);
  const XPlaneReader reader(gpu);
  EXPECT_EQ(reader.EventName(gpu.lines(3).events(0)), "m/A:A");
  EXPECT_EQ(EventStartNs(ProfileStartNs(u.space()), gpu.lines(3), gpu.lines(3).events(0)),
            kT0 + 100);
  EXPECT_EQ(reader.IntStat(gpu.lines(2).events(0), kStatStepNum), 1);
  EXPECT_EQ(Validate(u.space()).ok(), true);
  // A second pass adds nothing: the plane has its derived lines.
  EXPECT_EQ(AddDerivedLines(u.mutable_space()), 0);
  EXPECT_EQ(u.gpu().lines_size(), 4);
}

}  // namespace
}  // namespace profctl::xspace
