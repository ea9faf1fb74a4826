// The XProf conformance checker on hand-made XSpaces: a small file that follows every convention
// passes, and each rule fires on a copy broken in the way that rule is about.
#include "tests/xprof_conformance.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

namespace profctl::testkit {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using xspace::XEvent;
using xspace::XLine;
using xspace::XPlane;
using xspace::XPlaneBuilder;
using xspace::XSpace;
using xspace::XStat;

constexpr int64_t kP = 1'767'225'600LL * kNanosPerSecond;  // profile start
using ::profctl::test_time::kMs;
constexpr absl::string_view kStem = "worker-1";

void AddCaps(XPlaneBuilder& p) {
  XStat* s = p.plane()->add_stats();
  s->set_metadata_id(p.StatMetadataId("device_vendor"));
  s->set_str_value("Nvidia");
  s = p.plane()->add_stats();
  s->set_metadata_id(p.StatMetadataId("gpu_device_name"));
  s->set_str_value("NVIDIA H100 80GB HBM3");
  p.AddPlaneStat(p.StatMetadataId("clock_rate"), int64_t{1'980'000});
  p.AddPlaneStat(p.StatMetadataId("core_count"), int64_t{132});
  p.AddPlaneStat(p.StatMetadataId("memory_bandwidth"), uint64_t{3'352'320'000'000});
  p.AddPlaneStat(p.StatMetadataId("memory_size"), uint64_t{85'520'809'984});
  p.AddPlaneStat(p.StatMetadataId("compute_cap_major"), int64_t{9});
  p.AddPlaneStat(p.StatMetadataId("compute_cap_minor"), int64_t{0});
}

void AddRef(XPlaneBuilder& p, XEvent* e, absl::string_view stat, absl::string_view value) {
  XStat* s = e->add_stats();
  s->set_metadata_id(p.StatMetadataId(stat));
  s->set_ref_value(static_cast<uint64_t>(p.StatMetadataId(value)));
}

void AddDouble(XPlaneBuilder& p, XEvent* e, absl::string_view stat, double value) {
  XStat* s = e->add_stats();
  s->set_metadata_id(p.StatMetadataId(stat));
  s->set_double_value(value);
}

// A kernel with everything GPU Kernel Stats and the op stats need.
void AddKernel(XPlaneBuilder& gpu, XLine* line, int64_t start, uint64_t corr) {
  XEvent* e = gpu.AddEvent(line, gpu.EventMetadataId("sm90_xmma_gemm_bf16"), start, kMs);
  gpu.AddStat(e, gpu.StatMetadataId("correlation_id"), corr);
  AddRef(gpu, e, "kernel_details",
         "regs:64 static_shared:0 dynamic_shared:49152 grid:1024,1,1 block:256,1,1 occ_pct:50");
  AddDouble(gpu, e, "theoretical_occupancy_pct", 50.0);
  AddRef(gpu, e, "tf_op", "model/dense_1/MatMul:MatMul");
}

XEvent* AddLaunch(XPlaneBuilder& host, XLine* line, absl::string_view name, int64_t start,
                  uint64_t corr, uint64_t device) {
  XEvent* e = host.AddEvent(line, host.EventMetadataId(name), start, 10'000);
  host.AddStat(e, host.StatMetadataId("correlation_id"), corr);
  host.AddStat(e, host.StatMetadataId("device_id"), device);
  return e;
}

// One host, two GPUs, one step: GPU 0's thread has the step root, GPU 1's thread joins it with
// a consumer wrapper. Everything as TSL_WIRE.md's conventions have it.
XSpace GoodSpace() {
  XSpace space;
  space.add_hostnames(std::string(kStem));
  XPlaneBuilder host(space.add_planes(), 49, "/host:CPU", kP);
  XLine* main = host.AddLine(1000, "python3 main (GPU 0)", kP);
  XEvent* root = host.AddEvent(main, host.EventMetadataId("train"), kP + kMs, 8 * kMs);
  host.AddStat(root, host.StatMetadataId("_r"), int64_t{1});
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{5});
  host.AddStat(root, host.StatMetadataId("_pt"), int64_t{0});
  host.AddStat(root, host.StatMetadataId("_p"), int64_t{42});
  AddLaunch(host, main, "cudaMemcpyAsync", kP + 2 * kMs, 8, 0);
  XEvent* alloc =
      host.AddEvent(main, host.EventMetadataId("MemoryAllocation"), kP + 2 * kMs + 5'000, 0);
  for (const char* stat : {"bytes_allocated", "allocation_bytes", "addr", "requested_bytes"}) {
    host.AddStat(alloc, host.StatMetadataId(stat), int64_t{4096});
  }
  host.AddStat(alloc, host.StatMetadataId("allocator_name"), "GPU_0_bfc");
  AddDouble(host, alloc, "fragmentation", 0.0);
  AddLaunch(host, main, "cudaLaunchKernel", kP + 3 * kMs, 7, 0);

  XLine* other = host.AddLine(1001, "python3 main (GPU 1)", kP);
  XEvent* wrapper = host.AddEvent(other, host.EventMetadataId("train_step 5"), kP + kMs, 8 * kMs);
  host.AddStat(wrapper, host.StatMetadataId("_ct"), int64_t{0});
  host.AddStat(wrapper, host.StatMetadataId("_c"), int64_t{42});
  AddLaunch(host, other, "cudaLaunchKernel", kP + 3 * kMs, 9, 1);

  XPlaneBuilder gpu0(space.add_planes(), 0, "/device:GPU:0", kP);
  AddCaps(gpu0);
  XLine* compute = gpu0.AddLine(7, "Stream #7(Compute)", kP);
  AddKernel(gpu0, compute, kP + 4 * kMs, 7);
  XLine* copies = gpu0.AddLine(13, "Stream #13(MemcpyH2D)", kP);
  XEvent* h2d = gpu0.AddEvent(copies, gpu0.EventMetadataId("MemcpyHToD"), kP + 2 * kMs, kMs);
  gpu0.AddStat(h2d, gpu0.StatMetadataId("correlation_id"), uint64_t{8});
  AddRef(gpu0, h2d, "memcpy_details", "kind_src:pinned kind_dst:device size:4096 dest:0 async:1");

  XPlaneBuilder gpu1(space.add_planes(), 1, "/device:GPU:1", kP);
  AddCaps(gpu1);
  AddKernel(gpu1, gpu1.AddLine(7, "Stream #7(Compute)", kP), kP + 4 * kMs, 9);

  xspace::SetProfileWindow(&space, kP, kP + 10 * kMs);
  return space;
}

XPlane* Plane(XSpace& space, absl::string_view name) {
  for (XPlane& p : *space.mutable_planes()) {
    if (p.name() == name) return &p;
  }
  ADD_FAILURE() << "no plane " << name;
  return space.add_planes();
}

// The first event named `name` on `plane`.
XEvent* Event(XPlane* plane, absl::string_view name) {
  for (XLine& line : *plane->mutable_lines()) {
    for (XEvent& e : *line.mutable_events()) {
      if (plane->event_metadata().at(e.metadata_id()).name() == name) return &e;
    }
  }
  ADD_FAILURE() << "no event " << name << " on " << plane->name();
  return nullptr;
}

// The stat `stat` of `e` (event stats only).
XStat* Stat(XPlane* plane, XEvent* e, absl::string_view stat) {
  for (XStat& s : *e->mutable_stats()) {
    if (plane->stat_metadata().at(s.metadata_id()).name() == stat) return &s;
  }
  ADD_FAILURE() << "no stat " << stat;
  return e->add_stats();
}

void RemoveStat(XPlane* plane, XEvent* e, absl::string_view stat) {
  auto* stats = e->mutable_stats();
  for (int i = stats->size() - 1; i >= 0; --i) {
    if (plane->stat_metadata().at(stats->Get(i).metadata_id()).name() == stat) {
      stats->DeleteSubrange(i, 1);
    }
  }
}

void RemovePlaneStat(XPlane* plane, absl::string_view stat) {
  auto* stats = plane->mutable_stats();
  for (int i = stats->size() - 1; i >= 0; --i) {
    if (plane->stat_metadata().at(stats->Get(i).metadata_id()).name() == stat) {
      stats->DeleteSubrange(i, 1);
    }
  }
}

std::vector<std::string> Check(const XSpace& space) { return CheckXProfConformance(space, kStem); }

// Breaks a copy of GoodSpace() and expects `rule` (with `text` in its message) to fire.
void ExpectRule(absl::string_view rule, absl::string_view text,
                const std::function<void(XSpace&)>& breakage) {
  XSpace space = GoodSpace();
  breakage(space);
  EXPECT_THAT(Check(space), Contains(AllOf(HasSubstr(absl::StrCat("[", rule, "]")),
                                           HasSubstr(std::string(text)))))
      << "rule " << rule << " did not fire with '" << text << "'";
}

TEST(XProfConformanceTest, TheHandMadeSpaceConforms) { EXPECT_THAT(Check(GoodSpace()), IsEmpty()); }

TEST(XProfConformanceTest, Hostnames) {
  ExpectRule("hostnames", "has 0 entries", [](XSpace& s) { s.clear_hostnames(); });
  ExpectRule("hostnames", "has 2 entries", [](XSpace& s) { s.add_hostnames("other"); });
  EXPECT_THAT(CheckXProfConformance(GoodSpace(), "10.0.0.7_6000"),
              Contains(HasSubstr("[hostnames] XSpace.hostnames 'worker-1' is not contained in the "
                                 "file stem '10.0.0.7_6000'")));
  // Contained is enough: TF's client saves <host>_<port>.xplane.pb.
  EXPECT_THAT(CheckXProfConformance(GoodSpace(), "worker-1_6000"), IsEmpty());
}

TEST(XProfConformanceTest, TaskEnvironment) {
  ExpectRule("task-environment", "has 0 'Task Environment' planes",
             [](XSpace& s) { s.mutable_planes()->DeleteSubrange(s.planes_size() - 1, 1); });
  ExpectRule("task-environment", "profile_start_time is int64, not uint64", [](XSpace& s) {
    XPlane* env = Plane(s, "Task Environment");
    for (XStat& stat : *env->mutable_stats()) {
      if (env->stat_metadata().at(stat.metadata_id()).name() == "profile_start_time") {
        stat.set_int64_value(kP);
      }
    }
  });
  ExpectRule("task-environment", "is not 0 < profile_start_time <= profile_stop_time",
             [](XSpace& s) { xspace::SetProfileWindow(&s, kP, kP - 1); });
}

TEST(XProfConformanceTest, RelativeTimeAndWindow) {
  // Absolute epoch line timestamps: XProf's int64 ps overflow.
  ExpectRule("relative-time", "is not relative to the profile start",
             [](XSpace& s) { Plane(s, "/device:GPU:1")->mutable_lines(0)->set_timestamp_ns(kP); });
  ExpectRule("relative-time", "does not fit int64 ps", [](XSpace& s) {
    Event(Plane(s, "/device:GPU:1"), "sm90_xmma_gemm_bf16")
        ->set_duration_ps(std::numeric_limits<int64_t>::max());
  });
  ExpectRule("window", "is outside the profile window", [](XSpace& s) {
    Event(Plane(s, "/device:GPU:1"), "sm90_xmma_gemm_bf16")->set_duration_ps(7 * kMs * 1000);
  });
}

TEST(XProfConformanceTest, WellFormedAndNoCuptiPlane) {
  ExpectRule("well-formed", "has undefined metadata id 999", [](XSpace& s) {
    Event(Plane(s, "/device:GPU:1"), "sm90_xmma_gemm_bf16")->set_metadata_id(999);
  });
  ExpectRule("well-formed", "is a ref to undefined stat metadata id 777", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    Stat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "tf_op")->set_ref_value(777);
  });
  ExpectRule("no-cupti-plane", "'/host:CUPTI' is there",
             [](XSpace& s) { XPlaneBuilder(s.add_planes(), 50, "/host:CUPTI"); });
}

TEST(XProfConformanceTest, StatTypesAndGroupId) {
  ExpectRule("stat-type", "stat _r is uint64, XProf reads int64", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "train"), "_r")->set_uint64_value(1);
  });
  ExpectRule("stat-type", "stat correlation_id is int64, XProf reads uint64", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    Stat(gpu, Event(gpu, "MemcpyHToD"), "correlation_id")->set_int64_value(8);
  });
  ExpectRule("stat-type", "stat _c is uint64", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "train_step 5"), "_c")->set_uint64_value(42);
  });
  ExpectRule("stat-type", "stat kernel_details is int64, XProf reads string or ref", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    Stat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "kernel_details")->set_int64_value(3);
  });
  ExpectRule("stat-type", "stat bytes_allocated is uint64", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "MemoryAllocation"), "bytes_allocated")->set_uint64_value(4096);
  });
  // Stats on event metadata count as the event's.
  ExpectRule("stat-type", "event metadata", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    XPlaneBuilder b(host, host->id(), host->name(), kP);
    XStat* st = host->mutable_event_metadata()->at(Event(host, "train")->metadata_id()).add_stats();
    st->set_metadata_id(b.StatMetadataId("step_num"));
    st->set_str_value("5");
  });
  ExpectRule("group-id", "has a group_id", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    XPlaneBuilder b(host, host->id(), host->name(), kP);
    b.AddStat(Event(host, "train"), b.StatMetadataId("group_id"), int64_t{0});
  });
}

TEST(XProfConformanceTest, OneStepRootPerStepPerHost) {
  // The old synthetic job's shape: every GPU thread marks the step with its own root.
  ExpectRule("step-root", "step 5 has 2 roots (on lines 1000, 1001)", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    XPlaneBuilder b(host, host->id(), host->name(), kP);
    XEvent* wrapper = Event(host, "train_step 5");
    RemoveStat(host, wrapper, "_ct");
    RemoveStat(host, wrapper, "_c");
    b.AddStat(wrapper, b.StatMetadataId("_r"), int64_t{1});
    b.AddStat(wrapper, b.StatMetadataId("step_num"), int64_t{5});
  });
  ExpectRule("step-root", "without an int64 step_num", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    RemoveStat(host, Event(host, "train"), "step_num");
  });
  ExpectRule("step-root", "without an int64 step_num", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "train"), "step_num")->set_uint64_value(5);
  });
}

TEST(XProfConformanceTest, OtherThreadsJoinTheStepThroughContextStats) {
  ExpectRule("step-join", "has half a context", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    RemoveStat(host, Event(host, "train_step 5"), "_ct");
  });
  ExpectRule("step-join", "consumes context (_ct 0, _c 43) that no event produces", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "train_step 5"), "_c")->set_int64_value(43);
  });
  // No wrapper at all: GPU 1's launch is in no step.
  ExpectRule("step-join", "launches during step 5 (root on line 1000) outside any consumer wrapper",
             [](XSpace& s) {
               XPlane* host = Plane(s, "/host:CPU");
               XEvent* wrapper = Event(host, "train_step 5");
               RemoveStat(host, wrapper, "_ct");
               RemoveStat(host, wrapper, "_c");
             });
}

TEST(XProfConformanceTest, KernelDetailsAndOps) {
  ExpectRule("kernel-details", "is a kernel without kernel_details", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemoveStat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "kernel_details");
  });
  ExpectRule("kernel-details", "is not 'regs:R static_shared:S", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    XEvent* k = Event(gpu, "sm90_xmma_gemm_bf16");
    RemoveStat(gpu, k, "kernel_details");
    // No occupancy: what the synthetic job wrote before.
    b.AddStat(k, b.StatMetadataId("kernel_details"),
              "regs:64 static_shared:0 dynamic_shared:49152 grid:1024,1,1 block:256,1,1");
  });
  ExpectRule("kernel-details", "has no double theoretical_occupancy_pct", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemoveStat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "theoretical_occupancy_pct");
  });
  ExpectRule("kernel-details", "differs from kernel_details occ_pct 50", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    Stat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "theoretical_occupancy_pct")
        ->set_double_value(37.5);
  });
  ExpectRule("kernel-op", "with neither tf_op nor hlo_op", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemoveStat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "tf_op");
  });
  ExpectRule("kernel-op", "tf_op 'MatMul' is not 'scope/Name:Type'", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    XEvent* k = Event(gpu, "sm90_xmma_gemm_bf16");
    RemoveStat(gpu, k, "tf_op");
    b.AddStat(k, b.StatMetadataId("tf_op"), "MatMul");
  });
}

TEST(XProfConformanceTest, MemcpyNamesAndDetails) {
  // CUPTI's own name: XProf counts the copy as compute.
  ExpectRule("memcpy-name", "counts this one as device compute", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    gpu->mutable_event_metadata()
        ->at(Event(gpu, "MemcpyHToD")->metadata_id())
        .set_name("MemcpyH2D");
  });
  ExpectRule("memcpy-details", "is a memcpy without memcpy_details", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    RemoveStat(gpu, Event(gpu, "MemcpyHToD"), "memcpy_details");
  });
  // What the synthetic job wrote before.
  ExpectRule("memcpy-details", "'kind:HtoD size:250000' is not CUPTI's", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    XEvent* copy = Event(gpu, "MemcpyHToD");
    RemoveStat(gpu, copy, "memcpy_details");
    b.AddStat(copy, b.StatMetadataId("memcpy_details"), "kind:HtoD size:250000");
  });
  ExpectRule("memcpy-details", "contradicts the copy direction", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    XEvent* copy = Event(gpu, "MemcpyHToD");
    RemoveStat(gpu, copy, "memcpy_details");
    b.AddStat(copy, b.StatMetadataId("memcpy_details"),
              "kind_src:device kind_dst:pinned size:4096 dest:0 async:1");
  });
}

TEST(XProfConformanceTest, LaunchesAndDeviceEventsAreLinked) {
  ExpectRule("correlation", "has no correlation_id", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemoveStat(gpu, Event(gpu, "sm90_xmma_gemm_bf16"), "correlation_id");
  });
  ExpectRule("correlation", "correlation_id 9 is on no /host:CPU event", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    XEvent* launch = nullptr;
    for (XEvent& e : *host->mutable_lines(1)->mutable_events()) {
      if (host->event_metadata().at(e.metadata_id()).name() == "cudaLaunchKernel") launch = &e;
    }
    ASSERT_NE(launch, nullptr);
    Stat(host, launch, "correlation_id")->set_uint64_value(99);
  });
  ExpectRule("correlation", "correlation_id 7 is on 2 /host:CPU events", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "cudaMemcpyAsync"), "correlation_id")->set_uint64_value(7);
  });
  ExpectRule("correlation", "by a host event with device_id 1, not 0", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    Stat(host, Event(host, "cudaMemcpyAsync"), "device_id")->set_uint64_value(1);
  });
  ExpectRule("device-id", "is a launch (it has a correlation_id) without device_id", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    RemoveStat(host, Event(host, "cudaMemcpyAsync"), "device_id");
  });
  ExpectRule("device-id", "is a device event with device_id", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    b.AddStat(Event(gpu, "sm90_xmma_gemm_bf16"), b.StatMetadataId("device_id"), uint64_t{1});
  });
}

TEST(XProfConformanceTest, DeviceCapabilities) {
  ExpectRule("device-capabilities", "/device:GPU:1 lacks the stat clock_rate",
             [](XSpace& s) { RemovePlaneStat(Plane(s, "/device:GPU:1"), "clock_rate"); });
  ExpectRule("device-capabilities", "stat memory_size is int64, TSL writes uint64", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemovePlaneStat(gpu, "memory_size");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    b.AddPlaneStat(b.StatMetadataId("memory_size"), int64_t{1} << 30);
  });
  ExpectRule("device-capabilities", "stat core_count is empty or zero", [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:1");
    RemovePlaneStat(gpu, "core_count");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    b.AddPlaneStat(b.StatMetadataId("core_count"), int64_t{0});
  });
  ExpectRule("device-capabilities", "'/device:GPU:1' has id 7, not 1",
             [](XSpace& s) { Plane(s, "/device:GPU:1")->set_id(7); });
}

TEST(XProfConformanceTest, StreamLines) {
  // The old synthetic job's all-reduce stream.
  ExpectRule("stream-line", "is named 'Stream #7(NCCL)', not 'Stream #7(<kinds>)'", [](XSpace& s) {
    Plane(s, "/device:GPU:1")->mutable_lines(0)->set_name("Stream #7(NCCL)");
  });
  ExpectRule("stream-line", "is named 'Stream #8(Compute)', not 'Stream #7", [](XSpace& s) {
    Plane(s, "/device:GPU:1")->mutable_lines(0)->set_name("Stream #8(Compute)");
  });
  ExpectRule("stream-line", "'Stream #7(MemcpyH2D)' does not list Compute", [](XSpace& s) {
    Plane(s, "/device:GPU:1")->mutable_lines(0)->set_name("Stream #7(MemcpyH2D)");
  });
  // XProf's derived lines are not stream lines.
  XSpace space = GoodSpace();
  Plane(space, "/device:GPU:1")->mutable_lines(0)->set_name("XLA Ops");
  EXPECT_THAT(Check(space), Not(Contains(HasSubstr("[stream-line]"))));
}

TEST(XProfConformanceTest, DerivedLines) {
  // profctl's derived lines in a file without group_id: XProf derives its own into the same ids.
  ExpectRule("derived-line", "every event of this line shows twice",
             [](XSpace& s) { EXPECT_GT(xspace::AddDerivedLines(&s), 0); });
  // A derived line under another id: XProf counts its events as device work.
  ExpectRule("derived-line", "has id 9, not TSL's -559038734", [](XSpace& s) {
    Plane(s, "/device:GPU:1")->mutable_lines(0)->set_name("TensorFlow Ops");
    Plane(s, "/device:GPU:1")->mutable_lines(0)->set_id(9);
  });
  const auto grouped_with_ops = [](XSpace& s) {
    XPlane* gpu = Plane(s, "/device:GPU:0");
    XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
    b.StatMetadataId("group_id");  // declared, as in a file grouped at collection time
    XLine* ops = b.AddLine(xspace::kXlaOpsLineId, "XLA Ops", kP);
    b.AddEvent(ops, b.EventMetadataId("fusion.1"), kP + 2 * kMs, kMs);
    b.AddEvent(ops, b.EventMetadataId("fusion.2"), kP + 4 * kMs, kMs);
    return ops;
  };
  ExpectRule("derived-line", "starts before the event before it", [&](XSpace& s) {
    XLine* ops = grouped_with_ops(s);
    ops->mutable_events()->SwapElements(0, 1);
  });
  // In order, with TSL's id, in a grouped file: no derived-line violation.
  XSpace space = GoodSpace();
  grouped_with_ops(space);
  EXPECT_THAT(Check(space), Not(Contains(HasSubstr("[derived-line]"))));
}

TEST(XProfConformanceTest, MemoryEvents) {
  ExpectRule("memory-event", "lacks addr: XProf's Memory Profile needs them", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    RemoveStat(host, Event(host, "MemoryAllocation"), "addr");
  });
  ExpectRule("memory-event", "lacks allocator_name or device_ordinal", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    RemoveStat(host, Event(host, "MemoryAllocation"), "allocator_name");
  });
}

TEST(XProfConformanceTest, EventsOnALineNest) {
  ExpectRule("nesting", "partly overlaps event #0 'train'", [](XSpace& s) {
    XPlane* host = Plane(s, "/host:CPU");
    // The launch runs past the end of the root that contains its start.
    Event(host, "cudaLaunchKernel")->set_duration_ps(7 * kMs * 1000);
  });
  // Touching and zero-length events nest.
  XSpace space = GoodSpace();
  XPlane* host = Plane(space, "/host:CPU");
  XPlaneBuilder b(host, host->id(), host->name(), kP);
  b.AddEvent(host->mutable_lines(0), b.EventMetadataId("after"), kP + 9 * kMs, 0);
  EXPECT_THAT(Check(space), IsEmpty());
}

TEST(XProfConformanceTest, ListsAFewViolationsPerRuleThenCountsTheRest) {
  XSpace space = GoodSpace();
  XPlane* gpu = Plane(space, "/device:GPU:1");
  XPlaneBuilder b(gpu, gpu->id(), gpu->name(), kP);
  XLine* line = gpu->mutable_lines(0);
  for (int i = 0; i < 12; ++i) {
    b.AddEvent(line, b.EventMetadataId("bare_kernel"), kP + 6 * kMs + i * 1000, 500);
  }
  const std::vector<std::string> v = Check(space);
  int kernel_op = 0;
  for (const std::string& s : v) kernel_op += absl::StartsWith(s, "[kernel-op] /device:GPU:1");
  EXPECT_EQ(kernel_op, 5);
  EXPECT_THAT(v, Contains("[kernel-op] ... and 7 more violations of this rule"));
}

}  // namespace
}  // namespace profctl::testkit
