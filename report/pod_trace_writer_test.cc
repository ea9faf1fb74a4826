#include "report/pod_trace_writer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
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
#include "report/pod_trace_test_spaces.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/trace_data.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

using ::profctl::test_data::DataPath;
using ::profctl::testkit::IsOk;

namespace profctl::report {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using ::testing::HasSubstr;

using test_spaces::DerivedSpace;
using test_spaces::HostSpace;
using test_spaces::kMs;
using test_spaces::kT0;
using test_spaces::kUs;
using test_spaces::LaunchSpace;

// Reads back a finished trace: gunzip, then parse the JSON with protobuf's parser.
Struct ReadTrace(const std::string& path) {
  absl::StatusOr<std::string> gz = ReadFile(path);
  EXPECT_THAT(gz, IsOk());
  absl::StatusOr<std::string> json = GzipDecompress(gz.ok() ? *gz : "");
  EXPECT_THAT(json, IsOk());
  Struct doc;
  EXPECT_THAT(google::protobuf::util::JsonStringToMessage(json.ok() ? *json : "", &doc), IsOk());
  return doc;
}

struct Parsed {
  std::map<int, std::string> process_names;                     // pid -> name
  std::map<std::pair<int, int64_t>, std::string> thread_names;  // (pid, tid) -> name
  std::vector<const google::protobuf::Struct*> complete;        // "X" events
  std::map<std::string, std::vector<const Struct*>> by_phase;   // every event, by "ph"
  std::map<int, int> sort_index;                                // pid -> process_sort_index
};

Parsed Index(const Struct& doc) {
  Parsed p;
  for (const Value& v : doc.fields().at("traceEvents").list_value().values()) {
    const Struct& e = v.struct_value();
    const std::string& ph = e.fields().at("ph").string_value();
    const int pid = static_cast<int>(e.fields().at("pid").number_value());
    p.by_phase[ph].push_back(&e);
    if (ph == "M" && e.fields().at("name").string_value() == "process_sort_index") {
      p.sort_index[pid] = static_cast<int>(
          e.fields().at("args").struct_value().fields().at("sort_index").number_value());
    }
    if (ph == "X") {
      p.complete.push_back(&e);
    } else if (e.fields().at("name").string_value() == "process_name") {
      p.process_names[pid] =
          e.fields().at("args").struct_value().fields().at("name").string_value();
    } else if (e.fields().at("name").string_value() == "thread_name") {
      const auto tid = static_cast<int64_t>(e.fields().at("tid").number_value());
      p.thread_names[{pid, tid}] =
          e.fields().at("args").struct_value().fields().at("name").string_value();
    }
  }
  return p;
}

TEST(PodTraceWriterTest, TwoHostsWithKnownOffsetsLineUpOnTheCoordinatorClock) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, /*base_ns=*/kT0);
  ASSERT_THAT(w, IsOk());
  {
    // Each host's XSpace is dropped once added.
    const xspace::XSpace a = HostSpace(263 * kMs, /*relative_lines=*/true, 0);
    ASSERT_THAT(xspace::Validate(a), IsOk());
    ASSERT_THAT(w->AddHost("host-a", a, 263 * kMs), IsOk());
  }
  {
    // An older file with absolute line timestamps reads through the same helpers.
    const xspace::XSpace b = HostSpace(-1537 * kMs, /*relative_lines=*/false, 123);
    ASSERT_THAT(w->AddHost("host-b", b, -1537 * kMs), IsOk());
  }
  EXPECT_FALSE(PathExists(path));
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->hosts(), 2);
  EXPECT_EQ(w->events(), 4);

  const Struct doc = ReadTrace(path);
  EXPECT_EQ(doc.fields().at("displayTimeUnit").string_value(), "ns");
  EXPECT_EQ(doc.fields().at("otherData").struct_value().fields().at("producer").string_value(),
            "profctl");
  const Parsed p = Index(doc);
  // One process per (host, plane with lines): the Task Environment plane has none. Host k's
  // pids start at k * kPidsPerHost + 1.
  constexpr int kB = PodTraceWriter::kPidsPerHost;
  EXPECT_THAT(p.process_names,
              ::testing::ElementsAre(::testing::Pair(1, "host-a /device:GPU:0"),
                                     ::testing::Pair(2, "host-a /host:CPU"),
                                     ::testing::Pair(kB + 1, "host-b /device:GPU:0"),
                                     ::testing::Pair(kB + 2, "host-b /host:CPU")));
  EXPECT_EQ(p.thread_names.at({1, 21}), "Stream #21(NCCL)");
  EXPECT_EQ(p.thread_names.at({kB + 2, 1000}), "python3 main");

  std::map<int, double> allreduce_ts, train_ts;
  for (const Struct* e : p.complete) {
    const int pid = static_cast<int>(e->fields().at("pid").number_value());
    const std::string& name = e->fields().at("name").string_value();
    const auto& args = e->fields().at("args").struct_value().fields();
    if (name == "ncclDevKernel_AllReduce") {
      allreduce_ts[pid] = e->fields().at("ts").number_value();
      EXPECT_EQ(e->fields().at("dur").number_value(), 1000);  // us
      EXPECT_EQ(e->fields().at("tid").number_value(), 21);
      EXPECT_EQ(args.at("correlation_id").number_value(), 42);
      EXPECT_EQ(args.at("kernel_details").string_value(), "regs:64");
    } else {
      EXPECT_EQ(name, "train");
      train_ts[pid] = e->fields().at("ts").number_value();
      EXPECT_EQ(args.at("step_num").number_value(), 7);
    }
  }
  // Both all-reduces start 9 ms after kT0 on the coordinator's clock, whatever the host clocks.
  EXPECT_EQ(allreduce_ts.at(1), 9000);
  EXPECT_DOUBLE_EQ(allreduce_ts.at(kB + 1), 9000.123);  // exact ns in the decimals
  EXPECT_EQ(train_ts.at(2), 0);
  EXPECT_EQ(train_ts.at(kB + 2), 0);
}

TEST(PodTraceWriterTest, MicrosecondDecimalsAreExactForNegativeTimes) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "t.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0 + 20 * kMs);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("h", HostSpace(0, true, 5), 0), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  absl::StatusOr<std::string> json = GzipDecompress(*ReadFile(path));
  ASSERT_THAT(json, IsOk());
  EXPECT_THAT(*json, HasSubstr("\"ts\":-10999.995,\"dur\":1000,"));
  EXPECT_THAT(*json, HasSubstr("\"ts\":-20000,\"dur\":20000,"));
}

int CountTemporaries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) n += absl::StrContains(e->d_name, ".tmp.");
  closedir(d);
  return n;
}

TEST(PodTraceWriterTest, StreamsManyHostsAndLeavesNothingUntilFinished) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  constexpr int kHosts = 20, kEvents = 2000;
  {
    absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
    ASSERT_THAT(w, IsOk());
    for (int h = 0; h < kHosts; ++h) {
      xspace::XSpace space;
      xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
      xspace::XLine* line = b.AddLine(7, "Stream #7", kT0);
      for (int i = 0; i < kEvents; ++i) {
        b.AddEvent(line, b.EventMetadataId(absl::StrCat("kernel_", i % 17)), kT0 + i * kUs, 500);
      }
      xspace::SetProfileWindow(&space, kT0, kT0 + kEvents * kUs);
      ASSERT_THAT(w->AddHost(absl::StrCat("host-", h), space, h * kMs), IsOk());
    }
    EXPECT_EQ(w->events(), kHosts * kEvents);
    EXPECT_EQ(CountTemporaries(tmp.path()), 1);
    EXPECT_FALSE(PathExists(path));
  }  // destroyed unfinished: nothing is left behind
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
  EXPECT_FALSE(PathExists(path));

  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  xspace::XSpace space;
  xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
  b.AddEvent(b.AddLine(7, "s", kT0), b.EventMetadataId("k"), kT0, 1);
  ASSERT_THAT(w->AddHost("only", space, 0), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(Index(ReadTrace(path)).complete.size(), 1u);
  EXPECT_EQ(w->AddHost("late", space, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->Finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
}

// What the coordinator does at 1,024 hosts: hosts rendered and compressed on several threads,
// joined in order. The file is byte for byte what one thread writes, a single gzip member (zlib
// stops at the first member's end: GzipDecompress would miss the rest), valid JSON even when the
// first hosts have nothing to show.
TEST(PodTraceWriterTest, HostsRenderedOnManyThreadsJoinInOrderAsOneThreadWritesThem) {
  const testkit::TempDir tmp;
  constexpr int kHosts = 24;
  std::vector<xspace::XSpace> spaces(kHosts);
  for (int h = 2; h < kHosts; ++h) {  // hosts 0 and 1: no planes with lines
    spaces[h] = HostSpace(h * kMs, /*relative_lines=*/h % 2 == 0, h);
    xspace::XPlaneBuilder b(spaces[h].add_planes(), 7, "/device:GPU:1", kT0);
    xspace::XLine* line = b.AddLine(9, "Stream #9", kT0);
    for (int i = 0; i < 3000; ++i) {  // past the 64 KiB flush and zlib's 32 KiB window
      b.AddEvent(line, b.EventMetadataId(absl::StrCat("kernel_", i % 13)), kT0 + i * kUs, 400);
    }
  }
  const std::string serial_path = JoinPath(tmp.path(), "serial.json.gz");
  absl::StatusOr<PodTraceWriter> serial = PodTraceWriter::Open(serial_path, kT0);
  ASSERT_THAT(serial, IsOk());
  for (int h = 0; h < kHosts; ++h) {
    ASSERT_THAT(serial->AddHost(absl::StrCat("host-", h), spaces[h], h * kMs), IsOk());
  }
  ASSERT_THAT(serial->Finish(), IsOk());

  std::vector<absl::StatusOr<RenderedHost>> rendered(kHosts, absl::UnknownError("not yet"));
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int h = t; h < kHosts; h += 4) {
          rendered[h] =
              PodTraceWriter::Render(absl::StrCat("host-", h), spaces[h], h * kMs, kT0, h);
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(rendered[1], IsOk());
  EXPECT_EQ(rendered[1]->piece.size, 0u);
  // Out of order, or made for another base: refused, and the writer fails.
  {
    absl::StatusOr<PodTraceWriter> other = PodTraceWriter::Open(path + ".other", kT0 + 1);
    ASSERT_THAT(other, IsOk());
    EXPECT_EQ(other->AddRendered(*rendered[0]).code(), absl::StatusCode::kInvalidArgument);
    absl::StatusOr<PodTraceWriter> skip = PodTraceWriter::Open(path + ".skip", kT0);
    ASSERT_THAT(skip, IsOk());
    EXPECT_EQ(skip->AddRendered(*rendered[1]).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(skip->Finish().code(), absl::StatusCode::kInvalidArgument);
  }
  for (int h = 0; h < kHosts; ++h) {
    ASSERT_THAT(rendered[h], IsOk()) << rendered[h].status();
    ASSERT_THAT(w->AddRendered(*rendered[h]), IsOk());
  }
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->events(), serial->events());
  EXPECT_EQ(*GzipDecompress(*ReadFile(path)), *GzipDecompress(*ReadFile(serial_path)));
  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  EXPECT_EQ(p.complete.size(), static_cast<size_t>(w->events()));
  ASSERT_EQ(p.process_names.size(), 3u * (kHosts - 2));
  // Processes by host, then plane: host 2's are the lowest pids, host 23's the highest.
  EXPECT_EQ(p.process_names.begin()->first, 2 * PodTraceWriter::kPidsPerHost + 1);
  EXPECT_EQ(p.process_names.begin()->second, "host-2 /device:GPU:0");
  EXPECT_EQ(p.process_names.rbegin()->second, "host-23 /device:GPU:1");
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
}

double Num(const Struct& e, const std::string& key) { return e.fields().at(key).number_value(); }
std::string Str(const Struct& e, const std::string& key) {
  return e.fields().at(key).string_value();
}

TEST(PodTraceWriterTest, LaunchesFlowToTheirKernelsOnEveryHostWithIdsUniqueAcrossHosts) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("host-a", LaunchSpace(263 * kMs), 263 * kMs), IsOk());
  ASSERT_THAT(w->AddHost("host-b", LaunchSpace(-5 * kMs), -5 * kMs), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->flow_events(), 4);
  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  constexpr int kB = PodTraceWriter::kPidsPerHost;
  ASSERT_EQ(p.by_phase.count("s"), 1u);
  ASSERT_EQ(p.by_phase.count("f"), 1u);
  // One arrow per host: correlation id 42. 43 (no kernel) and 44 (no launch) get none.
  const std::vector<const Struct*>& starts = p.by_phase.at("s");
  const std::vector<const Struct*>& finishes = p.by_phase.at("f");
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(finishes.size(), 2u);
  for (int h = 0; h < 2; ++h) {
    const Struct& s = *starts[h];
    const Struct& f = *finishes[h];
    const double id = static_cast<double>((int64_t{h} << PodTraceWriter::kFlowIdHostShift) | 1);
    EXPECT_EQ(Num(s, "id"), id);
    EXPECT_EQ(Num(f, "id"), id);
    EXPECT_EQ(Str(s, "cat"), "launch");
    EXPECT_EQ(Str(f, "cat"), "launch");
    EXPECT_EQ(Str(s, "name"), Str(f, "name"));
    EXPECT_FALSE(s.fields().contains("bp"));
    EXPECT_EQ(Str(f, "bp"), "e");
    // On the launch's thread and the kernel's stream, at their starts on the coordinator clock.
    EXPECT_EQ(Num(s, "pid"), h * kB + 2);
    EXPECT_EQ(Num(s, "tid"), 1000);
    EXPECT_EQ(Num(s, "ts"), 4000);
    EXPECT_EQ(Num(f, "pid"), h * kB + 1);
    EXPECT_EQ(Num(f, "tid"), 7);
    EXPECT_EQ(Num(f, "ts"), 7000);
  }
  EXPECT_NE(Num(*starts[0], "id"), Num(*starts[1], "id"));
  // Only the slices at a flow's ends have its category.
  int launch_slices = 0;
  for (const Struct* e : p.complete) {
    launch_slices += e->fields().contains("cat") && Str(*e, "cat") == "launch";
  }
  EXPECT_EQ(launch_slices, 4);
}

// Where each flow event binds, by the rules of both viewers, for one trace:
//  - Chrome DevTools' trace engine (FlowsHandler): a flow event ("s", "t", "f") binds to the
//    first complete event in the file with the same ts, pid, tid and cat (a missing cat matches
//    a missing one); a flow is the events with the same cat, name and id, from "s" to "f".
//  - Perfetto (json_trace_parser, flows v1): "s", and "f" with "bp":"e", bind to the innermost
//    slice of that thread open at ts, events taken in (ts, file order): one that began before,
//    or at ts earlier in the file, and has not ended.
// Every flow must have one start and one end, and both viewers must bind each end to the same
// slice. Returns the number of flows; each flow's two slices as (launch, device work).
struct Bound {
  const Struct* from = nullptr;
  const Struct* to = nullptr;
};
std::vector<Bound> BindFlowsAsBothViewersDo(const Struct& doc) {
  const auto& events = doc.fields().at("traceEvents").list_value().values();
  struct Slice {
    const Struct* e;
    size_t index;
    double ts, end;
  };
  std::map<std::pair<double, double>, std::vector<Slice>> threads;  // (pid, tid) -> slices
  std::map<std::string, Bound> flows;                               // cat/name/id -> ends
  const auto cat = [](const Struct& e) {
    return e.fields().contains("cat") ? Str(e, "cat") : std::string("<none>");
  };
  for (size_t i = 0; i < static_cast<size_t>(events.size()); ++i) {
    const Struct& e = events[static_cast<int>(i)].struct_value();
    if (Str(e, "ph") == "X") {
      threads[{Num(e, "pid"), Num(e, "tid")}].push_back(
          {&e, i, Num(e, "ts"), Num(e, "ts") + Num(e, "dur")});
    }
  }
  for (auto& [thread, slices] : threads) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return std::tie(a.ts, a.index) < std::tie(b.ts, b.index);
    });
  }
  for (size_t i = 0; i < static_cast<size_t>(events.size()); ++i) {
    const Struct& e = events[static_cast<int>(i)].struct_value();
    const std::string ph = Str(e, "ph");
    if (ph != "s" && ph != "f") continue;
    EXPECT_EQ(ph == "f", e.fields().contains("bp") && Str(e, "bp") == "e");
    const double ts = Num(e, "ts");
    const std::vector<Slice>& slices = threads[{Num(e, "pid"), Num(e, "tid")}];
    const Struct* devtools = nullptr;
    const Struct* perfetto = nullptr;
    // Slices by (start, file order): those starting at ts, then back from there.
    const auto at = std::lower_bound(slices.begin(), slices.end(), ts,
                                     [](const Slice& s, double t) { return s.ts < t; });
    for (auto it = at; it != slices.end() && it->ts == ts; ++it) {
      if (cat(*it->e) == cat(e)) {
        devtools = it->e;
        break;
      }
    }
    for (auto it = std::upper_bound(slices.begin(), slices.end(), ts,
                                    [](double t, const Slice&s) { return t < s.ts; });
         it != slices.begin();) {
      --it;
      const bool begun = it->ts < ts || it->index < i;
      const bool open = it->end > ts || it->ts == ts;
      if (begun && open) {
        perfetto = it->e;
        break;
      }
    }
    EXPECT_NE(devtools, nullptr) << "DevTools binds no slice to flow event " << i;
    EXPECT_EQ(devtools, perfetto) << "the viewers bind flow event " << i << " to different slices";
    Bound& flow =
        flows[absl::StrCat(cat(e), "/", Str(e, "name"), "/", static_cast<int64_t>(Num(e, "id")))];
    (ph == "s" ? flow.from : flow.to) = devtools;
  }
  std::vector<Bound> out;
  for (const auto& [key, flow] : flows) {
    EXPECT_NE(flow.from, nullptr) << key << " has no start";
    EXPECT_NE(flow.to, nullptr) << key << " has no end";
    out.push_back(flow);
  }
  return out;
}

// A launch nested in an op that begins at the same instant, a zero-length launch, and a launch
// whose kernel starts with another slice on its stream: each flow binds to its launch and its
// kernel in both viewers.
TEST(PodTraceWriterTest, EveryFlowBindsToItsLaunchAndKernelInBothViewers) {
  xspace::XSpace space;
  const int64_t agent = kT0;
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, agent);
  xspace::XLine* thread = host.AddLine(1000, "python3 main", agent);
  const int64_t hcorr = host.StatMetadataId("correlation_id");
  host.AddEvent(thread, host.EventMetadataId("aten::mm"), agent + 1 * kMs, 3 * kMs);
  host.AddStat(
      host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"), agent + 1 * kMs, 10 * kUs),
      hcorr, uint64_t{1});
  host.AddStat(host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"), agent + 2 * kMs, 0),
               hcorr, uint64_t{2});
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", agent);
  xspace::XLine* stream = gpu.AddLine(7, "Stream #7", agent);
  const int64_t corr = gpu.StatMetadataId("correlation_id");
  gpu.AddStat(gpu.AddEvent(stream, gpu.EventMetadataId("gemm"), agent + 5 * kMs, kMs), corr,
              uint64_t{1});
  gpu.AddStat(gpu.AddEvent(stream, gpu.EventMetadataId("relu"), agent + 6 * kMs, kMs), corr,
              uint64_t{2});
  xspace::SetProfileWindow(&space, agent, agent + 20 * kMs);
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("h", space, 0), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  const Struct doc = ReadTrace(path);
  const std::vector<Bound> flows = BindFlowsAsBothViewersDo(doc);
  ASSERT_EQ(flows.size(), 2u);
  for (const Bound& f : flows) {
    ASSERT_NE(f.from, nullptr);
    ASSERT_NE(f.to, nullptr);
    EXPECT_EQ(Str(*f.from, "name"), "cudaLaunchKernel");
    EXPECT_EQ(Num(f.from->fields().at("args").struct_value(), "correlation_id"),
              Num(f.to->fields().at("args").struct_value(), "correlation_id"));
  }
}

// A real capture (an H100 PyTorch job, tests/data/traces): every launch -> kernel flow binds at
// both ends in both viewers, to a launch and a device event of the same correlation id.
TEST(PodTraceWriterTest, EveryFlowOfARealCaptureBindsInBothViewers) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  xspace::XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, xspace::ProfileStartNs(space));
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("h100", space, 0), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  const Struct doc = ReadTrace(path);
  const std::vector<Bound> flows = BindFlowsAsBothViewersDo(doc);
  EXPECT_EQ(static_cast<int64_t>(flows.size()) * 2, w->flow_events());
  EXPECT_GT(flows.size(), 100u);
  for (const Bound& f : flows) {
    ASSERT_NE(f.from, nullptr);
    ASSERT_NE(f.to, nullptr);
    EXPECT_EQ(Num(f.from->fields().at("args").struct_value(), "correlation_id"),
              Num(f.to->fields().at("args").struct_value(), "correlation_id"));
  }
}

TEST(PodTraceWriterTest, EachGpuGetsStepsTfOpsAndXlaOpsTracksAlignedLikeItsStreams) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("host-a", DerivedSpace(263 * kMs), 263 * kMs), IsOk());
  ASSERT_THAT(w->AddHost("host-b", DerivedSpace(-5 * kMs), -5 * kMs), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  // Per host: step 3, MatMul (two kernels merged), fusion.7; GPU 1 none (it has its own line).
  EXPECT_EQ(w->derived_events(), 2 * 3);
  EXPECT_EQ(w->events(), 2 * (1 + 3 + 3 + 2));  // the XEvents, derived ones apart
  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  EXPECT_EQ(p.complete.size(), static_cast<size_t>(w->events() + w->derived_events()));
  constexpr int kB = PodTraceWriter::kPidsPerHost;
  for (int h = 0; h < 2; ++h) {
    const int gpu0 = h * kB + 2;
    const int gpu1 = h * kB + 3;
    // Derived tracks: tid = TSL's id as an unsigned 32-bit number (3735928559 + n); the file's
    // own line keeps its id.
    EXPECT_EQ(p.thread_names.at({gpu0, 3735928559}), "Steps");
    EXPECT_EQ(p.thread_names.at({gpu0, 3735928562}), "TensorFlow Ops");
    EXPECT_EQ(p.thread_names.at({gpu0, 3735928564}), "XLA Ops");
    EXPECT_EQ(p.thread_names.at({gpu1, xspace::kTfOpsLineId}), "TensorFlow Ops");
    EXPECT_FALSE(p.thread_names.contains({gpu1, 3735928559}));
    // (name, ts, dur, step) of every derived event of this host, on the coordinator clock.
    std::vector<std::tuple<std::string, double, double, double>> derived;
    int gpu1_ops = 0;
    for (const Struct* e : p.complete) {
      if (Num(*e, "pid") <= h * kB || Num(*e, "pid") > (h + 1) * kB) continue;  // another host
      if (static_cast<int64_t>(Num(*e, "tid")) == xspace::kTfOpsLineId && Num(*e, "pid") == gpu1) {
        ++gpu1_ops;
      }
      if (!e->fields().contains("cat") || Str(*e, "cat") != "derived") continue;
      EXPECT_EQ(Num(*e, "pid"), gpu0);
      derived.emplace_back(Str(*e, "name"), Num(*e, "ts"), Num(*e, "dur"),
                           Num(e->fields().at("args").struct_value(), "step_num"));
    }
    EXPECT_EQ(gpu1_ops, 1);  // the file's own event: not derived again
    using D = std::tuple<std::string, double, double, double>;
    const std::vector<D> want = {D{"step 3", 2000, 4000, 3},
                                 D{"model/dense/MatMul:MatMul", 2000, 2000, 3},
                                 D{"fusion.7", 5000, 1000, 3}};
    EXPECT_EQ(derived, want);
  }
}

TEST(PodTraceWriterTest, DeviceMemoryInUseIsACounterPerGpuPerHost) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("host-a", LaunchSpace(263 * kMs), 263 * kMs), IsOk());
  ASSERT_THAT(w->AddHost("host-b", LaunchSpace(-5 * kMs), -5 * kMs), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->counter_events(), 6);
  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  ASSERT_EQ(p.by_phase.count("C"), 1u);
  std::map<int, std::vector<std::pair<double, double>>> samples;  // pid -> (ts, bytes)
  for (const Struct* c : p.by_phase.at("C")) {
    const int pid = static_cast<int>(Num(*c, "pid"));
    EXPECT_EQ(Str(*c, "name"), pid % PodTraceWriter::kPidsPerHost == 1 ? "GPU 0 memory in use"
                                                                       : "GPU 3 memory in use");
    samples[pid].emplace_back(
        Num(*c, "ts"), c->fields().at("args").struct_value().fields().at("bytes").number_value());
  }
  constexpr int kB = PodTraceWriter::kPidsPerHost;
  using Samples = std::vector<std::pair<double, double>>;
  for (int h = 0; h < 2; ++h) {
    // GPU 0's on its plane's process, aligned like the slices; the host allocator's left out.
    EXPECT_EQ(samples[h * kB + 1], (Samples{{1000, 4096}, {3000, 1024}}));
    EXPECT_EQ(samples[h * kB + 2], (Samples{{2000, 100}}));
  }
  // The memory events themselves stay, as slices with their details.
  int memory_slices = 0;
  for (const Struct* e : p.complete) memory_slices += absl::StartsWith(Str(*e, "name"), "Memory");
  EXPECT_EQ(memory_slices, 8);
}

TEST(PodTraceWriterTest, ThePodsStepsAreOneTrackAboveTheHosts) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT(w->AddHost("host-a", LaunchSpace(0), 0), IsOk());
  ASSERT_THAT(w->AddHost("host-b", LaunchSpace(0), 0), IsOk());
  analysis::PodBreakdown breakdown;
  for (int64_t n : {7, 8}) {
    analysis::PodStep step;
    step.step = n;
    step.pod_step_time_ns = 12 * kMs;
    step.straggler = n == 8 ? "host-b" : "";
    const int64_t start = kT0 + (n - 7) * 20 * kMs;
    // host-b starts 1 ms later and ends 2 ms after host-a: the pod's step is 1 + 12 ms long.
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
  ASSERT_THAT(w->AddPodSteps(breakdown), IsOk());
  EXPECT_EQ(w->pod_steps(), 2);
  EXPECT_EQ(w->AddPodSteps(breakdown).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->AddHost("late", LaunchSpace(0), 0).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_THAT(w->Finish(), IsOk());

  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  const int pod = 2 * PodTraceWriter::kPidsPerHost + 1;
  EXPECT_EQ(p.process_names.at(pod), "pod");
  EXPECT_EQ(p.thread_names.at({pod, 1}), "steps");
  EXPECT_EQ(p.sort_index.at(pod), -1);
  EXPECT_GT(p.sort_index.at(1), -1);
  std::vector<std::tuple<std::string, double, double, std::string>> steps;
  for (const Struct* e : p.complete) {
    if (Num(*e, "pid") != pod) continue;
    EXPECT_EQ(Num(*e, "tid"), 1);
    const auto& args = e->fields().at("args").struct_value();
    EXPECT_EQ(Num(args, "hosts"), 2);
    EXPECT_EQ(Num(args, "pod_step_time_ns"), 12 * kMs);
    steps.emplace_back(Str(*e, "name"), Num(*e, "ts"), Num(*e, "dur"), Str(args, "straggler"));
  }
  using Step = std::tuple<std::string, double, double, std::string>;
  EXPECT_THAT(steps, ::testing::ElementsAre(Step{"step 7", 0, 13000, ""},
                                            Step{"step 8", 20000, 13000, "host-b"}));
}

TEST(PodTraceWriterTest, AHostWithoutCorrelationIdsOrMemoryGetsNoFlowsOrCounters) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_THAT(w, IsOk());
  // HostSpace's kernel has correlation id 42 but its host plane launches nothing.
  ASSERT_THAT(w->AddHost("h", HostSpace(0, true, 0), 0), IsOk());
  ASSERT_THAT(w->AddPodSteps(analysis::PodBreakdown{}), IsOk());
  ASSERT_THAT(w->Finish(), IsOk());
  EXPECT_EQ(w->flow_events(), 0);
  EXPECT_EQ(w->counter_events(), 0);
  EXPECT_EQ(w->pod_steps(), 0);
  const Struct doc = ReadTrace(path);
  const Parsed p = Index(doc);
  EXPECT_EQ(p.by_phase.count("s") + p.by_phase.count("f") + p.by_phase.count("C"), 0u);
  EXPECT_EQ(p.process_names.at(PodTraceWriter::kPidsPerHost + 1), "pod");
}

TEST(PodTraceWriterTest, OpenInAMissingFolderNamesThePath) {
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open("/nonexistent/s/pod.trace.json.gz", 0);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/s/pod.trace.json.gz"));
}

}  // namespace
}  // namespace profctl::report
