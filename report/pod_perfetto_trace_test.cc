#include "report/pod_perfetto_trace.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "perfetto/pod_trace.pb.h"
#include "report/perfetto_trace_check.h"
#include "report/pod_trace_test_spaces.h"
#include "report/pod_trace_writer.h"
#include "report/proto_wire.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/trace_data.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

namespace profctl::report {
namespace {

using ::profctl::test_data::DataPath;
using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using test_spaces::DerivedSpace;
using test_spaces::HostSpace;
using test_spaces::kMs;
using test_spaces::kT0;
using test_spaces::kUs;
using test_spaces::LaunchSpace;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Reads back a finished trace: gunzip, then every rule of perfetto_trace_check.h.
PerfettoTraceModel ReadBackTrace(const std::string& path) {
  absl::StatusOr<std::string> gz = ReadFile(path);
  EXPECT_THAT(gz, IsOk());
  absl::StatusOr<std::string> bytes = GzipDecompress(gz.ok() ? *gz : "");
  EXPECT_THAT(bytes, IsOk());
  absl::StatusOr<PerfettoTraceModel> model = ReadPerfettoTrace(bytes.ok() ? *bytes : "");
  EXPECT_THAT(model, IsOk());
  return model.ok() ? *std::move(model) : PerfettoTraceModel{};
}

// Writes the hosts (name, space, offset), each rendered as its index in the list, then the pod's
// steps when given, and reads the file back.
struct Host {
  std::string name;
  xspace::XSpace space;
  int64_t offset_ns = 0;
};
PerfettoTraceModel WriteAndRead(const std::vector<Host>& hosts,
                                const analysis::PodBreakdown* steps = nullptr,
                                std::vector<PerfettoHostFragment>* fragments = nullptr) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.perfetto-trace.gz");
  absl::StatusOr<PodPerfettoWriter> w = PodPerfettoWriter::Open(path, kT0);
  EXPECT_THAT(w, IsOk());
  if (!w.ok()) return {};
  for (size_t i = 0; i < hosts.size(); ++i) {
    absl::StatusOr<PerfettoHostFragment> f =
        RenderPerfettoHost(hosts[i].name, hosts[i].space, static_cast<int64_t>(i));
    EXPECT_THAT(f, IsOk());
    if (!f.ok()) return {};
    EXPECT_THAT(w->AddHost(*f, hosts[i].offset_ns), IsOk());
    if (fragments != nullptr) fragments->push_back(*std::move(f));
  }
  if (steps != nullptr) {
    EXPECT_THAT(w->AddPodSteps(*steps), IsOk());
  }
  EXPECT_FALSE(PathExists(path));
  EXPECT_THAT(w->Finish(), IsOk());
  return ReadBackTrace(path);
}

std::vector<const PerfettoSliceInfo*> Named(const PerfettoTraceModel& m, absl::string_view name) {
  std::vector<const PerfettoSliceInfo*> out;
  for (const PerfettoSliceInfo& s : m.slices) {
    if (s.name == name) out.push_back(&s);
  }
  return out;
}

TEST(PodPerfettoTraceTest, TwoHostsWithKnownOffsetsLineUpOnTheCoordinatorClock) {
  std::vector<Host> hosts;
  hosts.push_back({"host-a", HostSpace(263 * kMs, /*relative_lines=*/true, 0), 263 * kMs});
  // An older file with absolute line timestamps reads through the same helpers.
  hosts.push_back({"host-b", HostSpace(-1537 * kMs, /*relative_lines=*/false, 123), -1537 * kMs});
  std::vector<PerfettoHostFragment> fragments;
  const PerfettoTraceModel m = WriteAndRead(hosts, nullptr, &fragments);
  EXPECT_EQ(m.base_ns, kT0);
  EXPECT_TRUE(m.processes_in_order);
  ASSERT_EQ(fragments.size(), 2u);
  EXPECT_EQ(fragments[0].events + fragments[1].events, 4);

  // One process per (host, plane with lines), pid = host_index * 256 + n + 1, ranked by pid.
  std::map<int64_t, std::string> processes;
  for (const auto& [uuid, t] : m.tracks) {
    if (t.pid < 0) continue;
    processes[t.pid] = t.name;
    EXPECT_EQ(t.rank, t.pid);
    EXPECT_TRUE(t.children_in_order);
  }
  EXPECT_THAT(processes,
              ElementsAre(Pair(1, "host-a /device:GPU:0"), Pair(2, "host-a /host:CPU"),
                          Pair(257, "host-b /device:GPU:0"), Pair(258, "host-b /host:CPU")));
  const std::vector<const PerfettoSliceInfo*> allreduce = Named(m, "ncclDevKernel_AllReduce");
  const std::vector<const PerfettoSliceInfo*> train = Named(m, "train");
  ASSERT_EQ(allreduce.size(), 2u);
  ASSERT_EQ(train.size(), 2u);
  for (const PerfettoSliceInfo* s : allreduce) {
    EXPECT_EQ(s->track, "Stream #21(NCCL)");
    EXPECT_EQ(s->end_ns - s->start_ns, 1 * kMs);
    EXPECT_EQ(s->args.at("correlation_id"), "42");
    EXPECT_EQ(s->args.at("kernel_details"), "regs:64");
  }
  // Both all-reduces start 9 ms after kT0 on the coordinator's clock, whatever the host clocks,
  // to the ns.
  EXPECT_EQ(allreduce[0]->process, "host-a /device:GPU:0");
  EXPECT_EQ(allreduce[0]->start_ns, kT0 + 9 * kMs);
  EXPECT_EQ(allreduce[1]->process, "host-b /device:GPU:0");
  EXPECT_EQ(allreduce[1]->start_ns, kT0 + 9 * kMs + 123);
  for (const PerfettoSliceInfo* s : train) {
    EXPECT_EQ(s->track, "python3 main");
    EXPECT_EQ(s->start_ns, kT0);
    EXPECT_EQ(s->end_ns, kT0 + 20 * kMs);
    EXPECT_EQ(s->args.at("step_num"), "7");
  }
}

// A string value is interned per track: its text is in the file once, however many events carry
// it, and every event still reads it back.
TEST(PodPerfettoTraceTest, ARepeatedStringValueIsWrittenOncePerTrack) {
  xspace::XSpace space;
  xspace::XPlaneBuilder p(space.add_planes(), 0, "/device:GPU:0", kT0);
  xspace::XLine* stream = p.AddLine(7, "Stream #7", kT0);
  const int64_t details = p.StatMetadataId("kernel_details");
  for (int i = 0; i < 50; ++i) {
    xspace::XEvent* e = p.AddEvent(stream, p.EventMetadataId("gemm"), kT0 + i * kUs, kUs / 2);
    p.AddStat(e, details, absl::string_view(i % 2 == 0 ? "regs:64 grid:8x8" : "regs:32 grid:1"));
  }
  xspace::SetProfileWindow(&space, kT0, kT0 + kMs);
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.perfetto-trace.gz");
  absl::StatusOr<PodPerfettoWriter> w = PodPerfettoWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<PerfettoHostFragment> f = RenderPerfettoHost("h", space, 0);
  ASSERT_THAT(f, IsOk());
  ASSERT_THAT(w->AddHost(*f, 0), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  absl::StatusOr<std::string> bytes = GzipDecompress(*ReadFile(path));
  ASSERT_THAT(bytes, IsOk());
  for (const std::string text : {"regs:64 grid:8x8", "regs:32 grid:1"}) {
    size_t count = 0;
    for (size_t at = bytes->find(text); at != std::string::npos; at = bytes->find(text, at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 1u) << text;
  }
  const PerfettoTraceModel m = ReadBackTrace(path);
  ASSERT_EQ(m.slices.size(), 50u);
  for (size_t i = 0; i < m.slices.size(); ++i) {
    EXPECT_EQ(m.slices[i].args.at("kernel_details"),
              i % 2 == 0 ? "regs:64 grid:8x8" : "regs:32 grid:1");
  }
}

TEST(PodPerfettoTraceTest, EventsThatOverlapWithoutNestingGoToAnotherTrackShownAsTheSameLine) {
  xspace::XSpace space;
  xspace::XPlaneBuilder p(space.add_planes(), 49, xspace::kHostPlaneName, kT0);
  xspace::XLine* line = p.AddLine(7, "worker", kT0);
  // outer [0, 100] holds inner [10, 50]; cross [40, 120] starts inside both and ends past
  // outer: it nests nowhere on the line's track; zero [100, 100] and after [120, 130] nest
  // again. Written out of order: the writer sorts.
  p.AddEvent(line, p.EventMetadataId("after"), kT0 + 120 * kUs, 10 * kUs);
  p.AddEvent(line, p.EventMetadataId("cross"), kT0 + 40 * kUs, 80 * kUs);
  p.AddEvent(line, p.EventMetadataId("outer"), kT0, 100 * kUs);
  p.AddEvent(line, p.EventMetadataId("inner"), kT0 + 10 * kUs, 40 * kUs);
  p.AddEvent(line, p.EventMetadataId("zero"), kT0 + 100 * kUs, 0);
  xspace::XLine* other = p.AddLine(8, "worker", kT0);  // another line of the same name
  p.AddEvent(other, p.EventMetadataId("solo"), kT0, kUs);
  xspace::SetProfileWindow(&space, kT0, kT0 + kMs);
  std::vector<PerfettoHostFragment> fragments;
  const PerfettoTraceModel m = WriteAndRead({{"h", space, 0}}, nullptr, &fragments);
  ASSERT_EQ(fragments.size(), 1u);
  EXPECT_EQ(fragments[0].lanes, 1);
  EXPECT_EQ(fragments[0].events, 6);
  EXPECT_EQ(fragments[0].events_skipped, 0);
  std::map<std::string, const PerfettoSliceInfo*> by_name;
  for (const PerfettoSliceInfo& s : m.slices) by_name[s.name] = &s;
  ASSERT_EQ(by_name.size(), 6u);
  const auto span = [&](const std::string& n) {
    return std::make_tuple(by_name.at(n)->start_ns - kT0, by_name.at(n)->end_ns - kT0,
                           by_name.at(n)->depth);
  };
  EXPECT_EQ(span("outer"), std::make_tuple(0, 100 * kUs, 0));
  EXPECT_EQ(span("inner"), std::make_tuple(10 * kUs, 50 * kUs, 1));
  EXPECT_EQ(span("cross"), std::make_tuple(40 * kUs, 120 * kUs, 0));
  EXPECT_EQ(span("zero"), std::make_tuple(100 * kUs, 100 * kUs, 0));
  EXPECT_EQ(span("after"), std::make_tuple(120 * kUs, 130 * kUs, 0));
  // cross is on a second track of the line: same parent, name, rank and merge key (the UI shows
  // one track); the other line of the same name has its own rank and key.
  const PerfettoTrackInfo& main_track = m.tracks.at(by_name.at("outer")->track_uuid);
  const PerfettoTrackInfo& lane = m.tracks.at(by_name.at("cross")->track_uuid);
  const PerfettoTrackInfo& solo = m.tracks.at(by_name.at("solo")->track_uuid);
  EXPECT_NE(main_track.uuid, lane.uuid);
  EXPECT_EQ(by_name.at("after")->track_uuid, main_track.uuid);
  for (const PerfettoTrackInfo* t : {&main_track, &lane, &solo}) {
    EXPECT_EQ(t->name, "worker");
    EXPECT_TRUE(t->merged_by_key);
    EXPECT_EQ(t->parent, main_track.parent);
  }
  EXPECT_EQ(lane.rank, main_track.rank);
  EXPECT_EQ(lane.merge_key, main_track.merge_key);
  EXPECT_NE(solo.merge_key, main_track.merge_key);
  EXPECT_GT(solo.rank, main_track.rank);
}

TEST(PodPerfettoTraceTest, LaunchesFlowToTheirKernelsOnEveryHostWithIdsUniqueAcrossHosts) {
  std::vector<PerfettoHostFragment> fragments;
  const PerfettoTraceModel m = WriteAndRead(
      {{"host-a", LaunchSpace(263 * kMs), 263 * kMs}, {"host-b", LaunchSpace(-5 * kMs), -5 * kMs}},
      nullptr, &fragments);
  ASSERT_EQ(fragments.size(), 2u);
  std::vector<uint64_t> ids;
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(fragments[static_cast<size_t>(h)].flow_ends, 2);
    const std::string host = h == 0 ? "host-a" : "host-b";
    const uint64_t id =
        (uint64_t{static_cast<uint64_t>(h)} << PodPerfettoWriter::kFlowIdHostShift) | 1;
    ids.push_back(id);
    // One arrow per host, for correlation id 42: from its first launch to its first device
    // work (the kernel, not the memcpy); 43 (no kernel) and 44 (no launch) get none.
    for (const PerfettoSliceInfo& s : m.slices) {
      if (!absl::StartsWith(s.process, host)) continue;
      if (s.name == "cudaLaunchKernel" && s.args.at("correlation_id") == "42") {
        EXPECT_THAT(s.flows_out, ElementsAre(id));
        EXPECT_EQ(s.start_ns, kT0 + 4 * kMs);
      } else if (s.name == "gemm") {
        EXPECT_THAT(s.flows_in, ElementsAre(id));
        EXPECT_EQ(s.start_ns, kT0 + 7 * kMs);
      } else {
        EXPECT_TRUE(s.flows_out.empty() && s.flows_in.empty()) << s.name;
      }
    }
  }
  EXPECT_NE(ids[0], ids[1]);
}

TEST(PodPerfettoTraceTest, EachGpuGetsStepsTfOpsAndXlaOpsTracksAlignedLikeItsStreams) {
  std::vector<PerfettoHostFragment> fragments;
  const PerfettoTraceModel m = WriteAndRead({{"host-a", DerivedSpace(263 * kMs), 263 * kMs},
                                             {"host-b", DerivedSpace(-5 * kMs), -5 * kMs}},
                                            nullptr, &fragments);
  for (const PerfettoHostFragment& f : fragments) {
    EXPECT_EQ(f.derived_events, 3);  // step 3, MatMul (two kernels merged), fusion.7
    EXPECT_EQ(f.events, 1 + 3 + 3 + 2);
  }
  for (const std::string host : {"host-a", "host-b"}) {
    using D = std::tuple<std::string, std::string, int64_t, int64_t, std::string>;
    std::vector<D> derived;
    int gpu1_own = 0;
    for (const PerfettoSliceInfo& s : m.slices) {
      if (s.process == host + " /device:GPU:1" && s.track == "TensorFlow Ops") ++gpu1_own;
      if (s.process != host + " /device:GPU:0") continue;
      if (absl::StartsWith(s.track, "Stream")) continue;
      derived.emplace_back(s.track, s.name, s.start_ns - kT0, s.end_ns - s.start_ns,
                           s.args.at("step_num"));
    }
    // GPU 1's own "TensorFlow Ops" line is shown as it is, not derived again.
    EXPECT_EQ(gpu1_own, 1);
    EXPECT_THAT(derived,
                ElementsAre(D{"Steps", "step 3", 2 * kMs, 4 * kMs, "3"},
                            D{"TensorFlow Ops", "model/dense/MatMul:MatMul", 2 * kMs, 2 * kMs, "3"},
                            D{"XLA Ops", "fusion.7", 5 * kMs, kMs, "3"}));
  }
  // The derived tracks come after the GPU's own lines.
  std::map<std::string, int64_t> rank;
  for (const auto& [uuid, t] : m.tracks) {
    if (t.pid < 0 && m.tracks.at(t.parent).name == "host-a /device:GPU:0") rank[t.name] = t.rank;
  }
  EXPECT_LT(rank.at("Stream #7(Compute)"), rank.at("Steps"));
  EXPECT_LT(rank.at("Steps"), rank.at("TensorFlow Ops"));
  EXPECT_LT(rank.at("TensorFlow Ops"), rank.at("XLA Ops"));
}

TEST(PodPerfettoTraceTest, DeviceMemoryInUseIsACounterPerGpuPerHost) {
  std::vector<PerfettoHostFragment> fragments;
  const PerfettoTraceModel m = WriteAndRead(
      {{"host-a", LaunchSpace(263 * kMs), 263 * kMs}, {"host-b", LaunchSpace(-5 * kMs), -5 * kMs}},
      nullptr, &fragments);
  for (const PerfettoHostFragment& f : fragments) EXPECT_EQ(f.counter_samples, 3);
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<int64_t, int64_t>>> samples;
  for (const PerfettoCounterInfo& c : m.counters) {
    samples[{c.process, c.track}].emplace_back(c.ts_ns - kT0, c.value);
  }
  using S = std::vector<std::pair<int64_t, int64_t>>;
  for (const std::string host : {"host-a", "host-b"}) {
    // GPU 0's on its plane's process, aligned like the slices; GPU 3 (no plane) on the host
    // plane's; the host allocator's left out.
    EXPECT_EQ((samples[{host + " /device:GPU:0", "GPU 0 memory in use"}]),
              (S{{1 * kMs, 4096}, {3 * kMs, 1024}}));
    EXPECT_EQ((samples[{host + " /host:CPU", "GPU 3 memory in use"}]), (S{{2 * kMs, 100}}));
  }
  EXPECT_EQ(samples.size(), 4u);
  int memory_slices = 0;  // the memory events themselves stay, as slices with their details
  for (const PerfettoSliceInfo& s : m.slices) memory_slices += absl::StartsWith(s.name, "Memory");
  EXPECT_EQ(memory_slices, 8);
}

TEST(PodPerfettoTraceTest, ThePodsStepsAreOneTrackAboveTheHosts) {
  analysis::PodBreakdown breakdown;
  for (int64_t n : {7, 8, 9}) {
    analysis::PodStep step;
    step.step = n;
    step.pod_step_time_ns = 12 * kMs;
    step.straggler = n == 8 ? "host-b" : "";
    // Step 9 starts before step 8 has ended on every host: it overlaps it.
    const int64_t start = kT0 + (n - 7) * 20 * kMs - (n == 9 ? 10 * kMs : 0);
    step.hosts.push_back(analysis::PodHostStep{.host = "host-a",
                                               .start_ns = start,
                                               .step_time_ns = 11 * kMs,
                                               .categories = {},
                                               .devices = {}});
    step.hosts.push_back(analysis::PodHostStep{.host = "host-b",
                                               .start_ns = start + kMs,
                                               .step_time_ns = 12 * kMs,
                                               .categories = {},
                                               .devices = {}});
    breakdown.steps.push_back(step);
  }
  analysis::PodStep empty;  // a step no host has is left out
  empty.step = 10;
  breakdown.steps.push_back(empty);

  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.perfetto-trace.gz");
  absl::StatusOr<PodPerfettoWriter> w = PodPerfettoWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<PerfettoHostFragment> f = RenderPerfettoHost("host-a", LaunchSpace(0), 0);
  ASSERT_THAT(f, IsOk());
  ASSERT_THAT(w->AddHost(*f, 0), IsOk());
  ASSERT_THAT(w->AddPodSteps(breakdown), IsOk());
  EXPECT_EQ(w->pod_steps(), 3);
  EXPECT_THAT(w->AddPodSteps(breakdown), StatusIs(absl::StatusCode::kFailedPrecondition));
  absl::StatusOr<PerfettoHostFragment> late = RenderPerfettoHost("late", LaunchSpace(0), 1);
  ASSERT_THAT(late, IsOk());
  EXPECT_THAT(w->AddHost(*late, 0), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(w->Finish(), IsOk());

  const PerfettoTraceModel m = ReadBackTrace(path);
  int64_t pod_rank = 0, host_rank = 0;
  for (const auto& [uuid, t] : m.tracks) {
    if (t.name == "pod") pod_rank = t.rank;
    if (t.name == "host-a /host:CPU") host_rank = t.rank;
  }
  EXPECT_LT(pod_rank, host_rank);
  using Step = std::tuple<std::string, int64_t, int64_t, std::string, std::string, std::string>;
  std::vector<Step> steps;
  for (const PerfettoSliceInfo& s : m.slices) {
    if (s.process != "pod") continue;
    EXPECT_EQ(s.track, "steps");
    EXPECT_EQ(s.args.at("hosts"), "2");
    EXPECT_EQ(s.args.at("pod_step_time_ns"), absl::StrCat(12 * kMs));
    steps.emplace_back(s.name, s.start_ns - kT0, s.end_ns - s.start_ns, s.args.at("straggler"),
                       s.args.at("step"), s.args.at("on_every_host"));
  }
  EXPECT_THAT(steps, ElementsAre(Step{"step 7", 0, 13 * kMs, "", "7", "false"},
                                 Step{"step 8", 20 * kMs, 13 * kMs, "host-b", "8", "false"},
                                 Step{"step 9", 30 * kMs, 13 * kMs, "", "9", "false"}));
}

TEST(PodPerfettoTraceTest, HostIndicesAreCheckedAndNothingIsWrittenUntilFinished) {
  EXPECT_THAT(RenderPerfettoHost("h", LaunchSpace(0), -1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RenderPerfettoHost("h", LaunchSpace(0), PodPerfettoWriter::kMaxHosts),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.perfetto-trace.gz");
  {
    absl::StatusOr<PodPerfettoWriter> w = PodPerfettoWriter::Open(path, kT0);
    ASSERT_THAT(w, IsOk());
    absl::StatusOr<PerfettoHostFragment> f = RenderPerfettoHost("h", LaunchSpace(0), 3);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT(w->AddHost(*f, 0), IsOk());
    // The same host index twice would give two hosts the same sequences and tracks.
    EXPECT_THAT(w->AddHost(*f, 0), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3")));
    EXPECT_THAT(w->Finish(), StatusIs(absl::StatusCode::kInvalidArgument));  // sticky
  }
  EXPECT_FALSE(PathExists(path));
  EXPECT_THAT(PodPerfettoWriter::Open("/nonexistent/dir/pod.perfetto-trace.gz", kT0).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/dir")));
}

// The Perfetto trace of the real H100 capture against its Chrome JSON trace: every complete event
// of the JSON is a slice of the Perfetto trace (name, process, track, start and duration to the
// ns, arguments), every flow arrow and counter sample is there, and the file is smaller.
TEST(PodPerfettoTraceTest, ARealCaptureHoldsWhatItsJsonTraceHolds) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  xspace::XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  const int64_t base = xspace::ProfileStartNs(space);
  const int64_t offset = -12'345'678;
  const testkit::TempDir tmp;
  const std::string json_path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> json = PodTraceWriter::Open(json_path, base);
  ASSERT_THAT(json, IsOk());
  ASSERT_THAT(json->AddHost("h100", space, offset), IsOk());
  ASSERT_THAT(json->Finish(), IsOk());
  const std::string path = JoinPath(tmp.path(), "pod.perfetto-trace.gz");
  absl::StatusOr<PodPerfettoWriter> w = PodPerfettoWriter::Open(path, base);
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<PerfettoHostFragment> f = RenderPerfettoHost("h100", space, 0);
  ASSERT_THAT(f, IsOk());
  ASSERT_THAT(w->AddHost(*f, offset), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(f->events_skipped, 0);
  EXPECT_EQ(w->events(), json->events());
  EXPECT_EQ(w->derived_events(), json->derived_events());
  EXPECT_EQ(w->flow_ends(), json->flow_events());
  EXPECT_EQ(w->counter_samples(), json->counter_events());
  EXPECT_GT(w->flow_ends(), 200);
  const PerfettoTraceModel m = ReadBackTrace(path);

  // The JSON's complete events as (process, thread, name, start ns, duration ns, args).
  absl::StatusOr<std::string> text = GzipDecompress(*ReadFile(json_path));
  ASSERT_THAT(text, IsOk());
  google::protobuf::Struct doc;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*text, &doc), IsOk());
  std::map<double, std::string> process;
  std::map<std::pair<double, double>, std::string> thread;
  const auto& events = doc.fields().at("traceEvents").list_value().values();
  for (const google::protobuf::Value& v : events) {
    const auto& e = v.struct_value().fields();
    if (e.at("ph").string_value() != "M") continue;
    const auto& args = e.at("args").struct_value().fields();
    if (e.at("name").string_value() == "process_name") {
      process[e.at("pid").number_value()] = args.at("name").string_value();
    } else if (e.at("name").string_value() == "thread_name") {
      thread[{e.at("pid").number_value(), e.at("tid").number_value()}] =
          args.at("name").string_value();
    }
  }
  // Micros with three decimals, relative to the base: exact in a double at this size.
  const auto ns = [](const google::protobuf::Value& v) {
    return static_cast<int64_t>(std::llround(v.number_value() * 1000));
  };
  using Key = std::tuple<std::string, std::string, std::string, int64_t, int64_t, size_t>;
  std::multiset<Key> from_json, from_perfetto;
  for (const google::protobuf::Value& v : events) {
    const auto& e = v.struct_value().fields();
    if (e.at("ph").string_value() != "X") continue;
    const size_t args = e.contains("args") ? e.at("args").struct_value().fields().size() : 0;
    from_json.insert({process.at(e.at("pid").number_value()),
                      thread.at({e.at("pid").number_value(), e.at("tid").number_value()}),
                      e.at("name").string_value(), base + ns(e.at("ts")), ns(e.at("dur")), args});
  }
  for (const PerfettoSliceInfo& s : m.slices) {
    from_perfetto.insert(
        {s.process, s.track, s.name, s.start_ns, s.end_ns - s.start_ns, s.args.size()});
  }
  EXPECT_EQ(from_perfetto.size(), from_json.size());
  EXPECT_TRUE(from_perfetto == from_json);
  // Every arrow joins a launch and its device work, by correlation id.
  std::map<uint64_t, std::pair<const PerfettoSliceInfo*, const PerfettoSliceInfo*>> arrows;
  for (const PerfettoSliceInfo& s : m.slices) {
    for (uint64_t id : s.flows_out) arrows[id].first = &s;
    for (uint64_t id : s.flows_in) arrows[id].second = &s;
  }
  EXPECT_EQ(static_cast<int64_t>(arrows.size()) * 2, w->flow_ends());
  for (const auto& [id, ends] : arrows) {
    ASSERT_NE(ends.first, nullptr);
    ASSERT_NE(ends.second, nullptr);
    EXPECT_EQ(ends.first->args.at("correlation_id"), ends.second->args.at("correlation_id"));
  }
  EXPECT_LT(ReadFile(path)->size(), ReadFile(json_path)->size());
}

// The reader holds the writer to Perfetto's rules: each of these breaks one, and is refused.
std::string Packet(absl::string_view body) {
  std::string out;
  proto_wire::AppendBytesField(&out, 1, body);
  return out;
}

TEST(PerfettoTraceCheckTest, RefusesWhatPerfettoWouldDropOrMisread) {
  using perfetto::TracePacket;
  const auto bytes = [](const std::vector<TracePacket>& packets) {
    std::string out;
    for (const TracePacket& p : packets) out += Packet(p.SerializeAsString());
    return out;
  };
  TracePacket head;
  auto* c = head.mutable_clock_snapshot()->add_clocks();
  c->set_clock_id(6);
  c->set_timestamp(1000);
  TracePacket process;
  process.mutable_track_descriptor()->set_uuid(10);
  process.mutable_track_descriptor()->mutable_process()->set_pid(1);
  TracePacket track;
  track.mutable_track_descriptor()->set_uuid(11);
  track.mutable_track_descriptor()->set_parent_uuid(10);
  TracePacket snapshot;
  snapshot.set_trusted_packet_sequence_id(5);
  auto* c64 = snapshot.mutable_clock_snapshot()->add_clocks();
  c64->set_clock_id(64);
  c64->set_timestamp(500);
  c64->set_is_incremental(true);
  auto* cb = snapshot.mutable_clock_snapshot()->add_clocks();
  cb->set_clock_id(6);
  cb->set_timestamp(2000);
  TracePacket begin;
  begin.set_trusted_packet_sequence_id(5);
  begin.set_sequence_flags(3);
  begin.mutable_trace_packet_defaults()->set_timestamp_clock_id(64);
  begin.mutable_trace_packet_defaults()->mutable_track_event_defaults()->set_track_uuid(11);
  begin.set_timestamp(0);
  begin.mutable_track_event()->set_type(1);
  begin.mutable_track_event()->set_name_iid(1);
  auto* name = begin.mutable_interned_data()->add_event_names();
  name->set_iid(1);
  name->set_name("a");
  TracePacket end;
  end.set_trusted_packet_sequence_id(5);
  end.set_sequence_flags(2);
  end.set_timestamp(7);
  end.mutable_track_event()->set_type(2);

  // As the writer makes it: a slice [2000, 2007] on the trace's clock.
  absl::StatusOr<PerfettoTraceModel> ok =
      ReadPerfettoTrace(bytes({head, process, track, snapshot, begin, end}));
  ASSERT_THAT(ok, IsOk());
  ASSERT_EQ(ok->slices.size(), 1u);
  EXPECT_EQ(ok->slices[0].name, "a");
  EXPECT_EQ(ok->slices[0].start_ns, 2000);
  EXPECT_EQ(ok->slices[0].end_ns, 2007);

  const auto refused = [&](const std::vector<TracePacket>& packets, absl::string_view why) {
    EXPECT_THAT(ReadPerfettoTrace(bytes(packets)),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(why)));
  };
  refused({head, process, track, begin, end}, "before its sequence snapshotted it");
  refused({head, process, snapshot, begin, end}, "not described before it");
  refused({head, track, process, snapshot, begin, end}, "not described before it");
  refused({head, process, track, snapshot, begin}, "slices open");
  refused({head, process, track, snapshot, begin, end, end}, "no slice open");
  TracePacket no_clear = begin;
  no_clear.set_sequence_flags(2);
  refused({head, process, track, snapshot, no_clear, end}, "before the incremental state");
  TracePacket no_needs = end;
  no_needs.clear_sequence_flags();
  refused({head, process, track, snapshot, begin, no_needs}, "SEQ_NEEDS_INCREMENTAL_STATE");
  TracePacket undefined = begin;
  undefined.clear_interned_data();
  refused({head, process, track, snapshot, undefined, end}, "not defined on its sequence");
  TracePacket redefined = end;
  redefined.set_sequence_flags(2);
  auto* again = redefined.mutable_interned_data()->add_event_names();
  again->set_iid(1);
  again->set_name("b");
  refused({head, process, track, snapshot, begin, redefined}, "redefined");
  TracePacket flow = begin;
  flow.mutable_track_event()->add_flow_ids(99);
  refused({head, process, track, snapshot, flow, end}, "flow 99");
  EXPECT_THAT(ReadPerfettoTrace("\x0a\x05\x01"), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace profctl::report
