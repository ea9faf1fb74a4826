#include "coordinator/report/pod_trace_writer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "common/xspace.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/temp_dir.h"

namespace profctl::report {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using ::testing::HasSubstr;

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01, coordinator clock

// Reads back a finished trace: gunzip, then parse the JSON with protobuf's parser.
Struct ReadTrace(const std::string& path) {
  absl::StatusOr<std::string> gz = ReadFile(path);
  EXPECT_TRUE(gz.ok()) << gz.status();
  absl::StatusOr<std::string> json = GzipDecompress(gz.ok() ? *gz : "");
  EXPECT_TRUE(json.ok()) << json.status();
  Struct doc;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json.ok() ? *json : "", &doc).ok());
  return doc;
}

struct Parsed {
  std::map<int, std::string> process_names;                 // pid -> name
  std::map<std::pair<int, int>, std::string> thread_names;  // (pid, tid) -> name
  std::vector<const google::protobuf::Struct*> complete;    // "X" events
};

Parsed Index(const Struct& doc) {
  Parsed p;
  for (const Value& v : doc.fields().at("traceEvents").list_value().values()) {
    const Struct& e = v.struct_value();
    const std::string& ph = e.fields().at("ph").string_value();
    const int pid = static_cast<int>(e.fields().at("pid").number_value());
    if (ph == "X") {
      p.complete.push_back(&e);
    } else if (e.fields().at("name").string_value() == "process_name") {
      p.process_names[pid] =
          e.fields().at("args").struct_value().fields().at("name").string_value();
    } else if (e.fields().at("name").string_value() == "thread_name") {
      const int tid = static_cast<int>(e.fields().at("tid").number_value());
      p.thread_names[{pid, tid}] =
          e.fields().at("args").struct_value().fields().at("name").string_value();
    }
  }
  return p;
}

// One host's trace on its own clock, skewed by `offset_ns` from the coordinator's: a GPU plane
// whose all-reduce ends 10 ms after kT0 in coordinator time, and a host thread.
xspace::XSpace HostSpace(int64_t offset_ns, bool relative_lines, int64_t sub_us_ns) {
  xspace::XSpace space;
  const int64_t agent = kT0 + offset_ns;  // kT0 on this host's clock
  const int64_t start = relative_lines ? agent - 1 * kMs : 0;
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", start);
  xspace::XLine* stream = gpu.AddLine(21, "Stream #21(NCCL)", agent);
  xspace::XEvent* e = gpu.AddEvent(stream, gpu.EventMetadataId("ncclDevKernel_AllReduce"),
                                   agent + 9 * kMs + sub_us_ns, 1 * kMs);
  gpu.AddStat(e, gpu.StatMetadataId("correlation_id"), uint64_t{42});
  gpu.AddStat(e, gpu.StatMetadataId("kernel_details"), absl::string_view("regs:64"));
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, start);
  xspace::XLine* thread = host.AddLine(1000, "python3 main", agent);
  xspace::XEvent* root = host.AddEvent(thread, host.EventMetadataId("train"), agent, 20 * kMs);
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{7});
  if (relative_lines) xspace::SetProfileWindow(&space, start, agent + 100 * kMs);
  EXPECT_EQ(stream->timestamp_ns(), relative_lines ? 1 * kMs : agent);
  return space;
}

TEST(PodTraceWriterTest, TwoHostsWithKnownOffsetsLineUpOnTheCoordinatorClock) {
  const testing::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, /*base_ns=*/kT0);
  ASSERT_TRUE(w.ok()) << w.status();
  {
    // Each host's XSpace is dropped once added.
    const xspace::XSpace a = HostSpace(263 * kMs, /*relative_lines=*/true, 0);
    ASSERT_TRUE(xspace::Validate(a).ok());
    ASSERT_TRUE(w->AddHost("host-a", a, 263 * kMs).ok());
  }
  {
    // An older file with absolute line timestamps reads through the same helpers.
    const xspace::XSpace b = HostSpace(-1537 * kMs, /*relative_lines=*/false, 123);
    ASSERT_TRUE(w->AddHost("host-b", b, -1537 * kMs).ok());
  }
  EXPECT_FALSE(PathExists(path));
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(w->hosts(), 2);
  EXPECT_EQ(w->events(), 4);

  const Struct doc = ReadTrace(path);
  EXPECT_EQ(doc.fields().at("displayTimeUnit").string_value(), "ns");
  EXPECT_EQ(doc.fields().at("otherData").struct_value().fields().at("producer").string_value(),
            "profctl");
  const Parsed p = Index(doc);
  // One process per (host, plane with lines): the Task Environment plane has none.
  EXPECT_THAT(p.process_names, ::testing::ElementsAre(::testing::Pair(1, "host-a /device:GPU:0"),
                                                      ::testing::Pair(2, "host-a /host:CPU"),
                                                      ::testing::Pair(3, "host-b /device:GPU:0"),
                                                      ::testing::Pair(4, "host-b /host:CPU")));
  EXPECT_EQ(p.thread_names.at({1, 21}), "Stream #21(NCCL)");
  EXPECT_EQ(p.thread_names.at({4, 1000}), "python3 main");

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
  EXPECT_DOUBLE_EQ(allreduce_ts.at(3), 9000.123);  // exact ns in the decimals
  EXPECT_EQ(train_ts.at(2), 0);
  EXPECT_EQ(train_ts.at(4), 0);
}

TEST(PodTraceWriterTest, MicrosecondDecimalsAreExactForNegativeTimes) {
  const testing::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "t.json.gz");
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0 + 20 * kMs);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->AddHost("h", HostSpace(0, true, 5), 0).ok());
  ASSERT_TRUE(w->Finish().ok());
  absl::StatusOr<std::string> json = GzipDecompress(*ReadFile(path));
  ASSERT_TRUE(json.ok());
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
  const testing::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "pod.trace.json.gz");
  constexpr int kHosts = 20, kEvents = 2000;
  {
    absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
    ASSERT_TRUE(w.ok());
    for (int h = 0; h < kHosts; ++h) {
      xspace::XSpace space;
      xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
      xspace::XLine* line = b.AddLine(7, "Stream #7", kT0);
      for (int i = 0; i < kEvents; ++i) {
        b.AddEvent(line, b.EventMetadataId(absl::StrCat("kernel_", i % 17)), kT0 + i * kUs, 500);
      }
      xspace::SetProfileWindow(&space, kT0, kT0 + kEvents * kUs);
      ASSERT_TRUE(w->AddHost(absl::StrCat("host-", h), space, h * kMs).ok());
    }
    EXPECT_EQ(w->events(), kHosts * kEvents);
    EXPECT_EQ(CountTemporaries(tmp.path()), 1);
    EXPECT_FALSE(PathExists(path));
  }  // destroyed unfinished: nothing is left behind
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
  EXPECT_FALSE(PathExists(path));

  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open(path, kT0);
  ASSERT_TRUE(w.ok());
  xspace::XSpace space;
  xspace::XPlaneBuilder b(space.add_planes(), 0, "/device:GPU:0", kT0);
  b.AddEvent(b.AddLine(7, "s", kT0), b.EventMetadataId("k"), kT0, 1);
  ASSERT_TRUE(w->AddHost("only", space, 0).ok());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_EQ(Index(ReadTrace(path)).complete.size(), 1u);
  EXPECT_EQ(w->AddHost("late", space, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->Finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
}

TEST(PodTraceWriterTest, OpenInAMissingFolderNamesThePath) {
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open("/nonexistent/s/pod.trace.json.gz", 0);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/s/pod.trace.json.gz"));
}

}  // namespace
}  // namespace profctl::report
