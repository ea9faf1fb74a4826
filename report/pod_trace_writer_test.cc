#include "report/pod_trace_writer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

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
  EXPECT_THAT(gz, IsOk());
  absl::StatusOr<std::string> json = GzipDecompress(gz.ok() ? *gz : "");
  EXPECT_THAT(json, IsOk());
  Struct doc;
  EXPECT_THAT(google::protobuf::util::JsonStringToMessage(json.ok() ? *json : "", &doc), IsOk());
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
  const Parsed p = Index(ReadTrace(path));
  EXPECT_EQ(p.complete.size(), static_cast<size_t>(w->events()));
  ASSERT_EQ(p.process_names.size(), 3u * (kHosts - 2));
  // Processes by host, then plane: host 2's are the lowest pids, host 23's the highest.
  EXPECT_EQ(p.process_names.begin()->first, 2 * PodTraceWriter::kPidsPerHost + 1);
  EXPECT_EQ(p.process_names.begin()->second, "host-2 /device:GPU:0");
  EXPECT_EQ(p.process_names.rbegin()->second, "host-23 /device:GPU:1");
  EXPECT_EQ(CountTemporaries(tmp.path()), 0);
}

TEST(PodTraceWriterTest, OpenInAMissingFolderNamesThePath) {
  absl::StatusOr<PodTraceWriter> w = PodTraceWriter::Open("/nonexistent/s/pod.trace.json.gz", 0);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/s/pod.trace.json.gz"));
}

}  // namespace
}  // namespace profctl::report
