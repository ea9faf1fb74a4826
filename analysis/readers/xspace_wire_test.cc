// The XSpace reader walks the wire format (xspace_reader.h): these tests hold it to what a
// protobuf parser would make of the same bytes, whatever the field order, buffer size or damage.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::analysis {
namespace {

using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using ::testing::AnyOf;
using ::testing::HasSubstr;

using ::profctl::test_time::kMs;
constexpr int64_t kWireT0 = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01, ns since the epoch

// A small but complete host: 2 GPUs, steps, launches, memcpys, collectives, skewed clock.
XSpace SyntheticSpace() {
  synthetic::SyntheticJobConfig config;
  config.rank = 1;
  config.world = 2;
  config.gpus = 2;
  config.kernels_per_step = 3;
  config.step_ms = 10;
  config.clock_skew_ns = 3 * kMs;
  const synthetic::SyntheticJob job(config);
  XSpace space;
  job.Generate(kWireT0, kWireT0 + 45 * kMs, &space);
  space.add_errors("CUPTI buffer overflow");
  space.add_warnings("dropped 3 events");
  return space;
}

// Everything a HostTrace holds, as one comparable string.
std::string Dump(const HostTrace& t) {
  std::string out = absl::StrCat(t.host, " [", t.window_start_ns, ",", t.window_end_ns, ")\n");
  for (const StepMarker& s : t.steps) {
    absl::StrAppend(&out, "step ", s.step, " ", s.start_ns, "-", s.end_ns, " t", s.thread_id, "\n");
  }
  for (const Op& o : t.host_ops) {
    absl::StrAppend(&out, "host ", static_cast<int>(o.kind), " ", o.start_ns, "-", o.end_ns, "\n");
  }
  for (const DeviceTrace& d : t.devices) {
    absl::StrAppend(&out, "device ", d.id, " ", d.name, "\n");
    for (const Op& o : d.ops) {
      absl::StrAppend(&out, "  ", static_cast<int>(o.kind), " ", o.start_ns, "-", o.end_ns, "\n");
    }
  }
  for (const std::string& w : t.warnings) absl::StrAppend(&out, "warning ", w, "\n");
  return out;
}

void Varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string LengthDelimited(uint32_t field, const std::string& bytes) {
  std::string out;
  Varint((field << 3) | 2, &out);
  Varint(bytes.size(), &out);
  return out + bytes;
}

// The same XSpace with every message's fields in an order no protobuf serializer writes: the
// space's errors before its planes, a plane's stat metadata first and its name last, a line's
// events before its id, name and timestamp. Concatenated messages merge, so a protobuf parser
// reads the same XSpace.
std::string Reordered(const XSpace& space) {
  XSpace rest = space;
  rest.clear_planes();
  std::string out = rest.SerializeAsString();
  for (const XPlane& plane : space.planes()) {
    XPlane stats_only;
    *stats_only.mutable_stat_metadata() = plane.stat_metadata();
    std::string p = stats_only.SerializeAsString();
    for (const XLine& line : plane.lines()) {
      XLine events_only;
      *events_only.mutable_events() = line.events();
      XLine header = line;
      header.clear_events();
      p += LengthDelimited(3, events_only.SerializeAsString() + header.SerializeAsString());
    }
    XPlane tail = plane;
    tail.clear_lines();
    tail.clear_stat_metadata();
    tail.clear_name();
    XPlane name_only;
    name_only.set_name(plane.name());
    p += tail.SerializeAsString() + name_only.SerializeAsString();
    out += LengthDelimited(1, p);
  }
  return out;
}

std::string WriteTemp(const testkit::TempDir& dir, const std::string& bytes) {
  const std::string path = absl::StrCat(dir.path(), "/h.xplane.pb");
  EXPECT_THAT(WriteFileAtomically(path, bytes), IsOk());
  return path;
}

TEST(XSpaceWireTest, FileReadAtAnyBufferSizeMatchesTheDecodedSpace) {
  const XSpace space = SyntheticSpace();
  absl::StatusOr<HostTrace> want = ReadXSpaceHost(space, "h", 3 * kMs);
  ASSERT_THAT(want, IsOk());
  ASSERT_GT(want->host_ops.size(), 50u);
  ASSERT_EQ(want->devices.size(), 2u);
  ASSERT_FALSE(want->steps.empty());

  testkit::TempDir dir;
  const std::string path = WriteTemp(dir, space.SerializeAsString());
  for (int buffer : {1, 7, 64, 4096, FileByteSource::kDefaultBufferBytes}) {
    absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(path, buffer);
    ASSERT_THAT(file, IsOk());
    absl::StatusOr<HostTrace> got = ReadXSpaceHost(**file, "h", 3 * kMs);
    ASSERT_THAT(got, IsOk()) << "buffer " << buffer << ": " << got.status();
    EXPECT_EQ(Dump(*got), Dump(*want)) << "buffer " << buffer;
  }
}

TEST(XSpaceWireTest, FieldOrderDoesNotMatter) {
  const XSpace space = SyntheticSpace();
  const std::string bytes = Reordered(space);
  XSpace parsed;  // the construction is right: protobuf reads the same space
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.SerializeAsString().size(), space.SerializeAsString().size());
  ASSERT_NE(bytes, space.SerializeAsString());

  absl::StatusOr<HostTrace> want = ReadXSpaceHost(space, "h", 0);
  absl::StatusOr<HostTrace> got = ReadXSpaceHost(StringByteSource(bytes), "h", 0);
  ASSERT_THAT(want, IsOk());
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(Dump(*got), Dump(*want));
  EXPECT_THAT(Dump(*got), HasSubstr("warning trace error: CUPTI buffer overflow"));
}

TEST(XSpaceWireTest, TruncatedBytesAreDataLossNamingTheByte) {
  const std::string bytes = SyntheticSpace().SerializeAsString();
  // Cut in the middle of the last plane's last line.
  const std::string cut = bytes.substr(0, bytes.size() - 3);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(StringByteSource(cut), "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr("not a valid serialized XSpace"));
  EXPECT_THAT(t.status().message(), HasSubstr(absl::StrCat(" of ", cut.size(), ")")));

  // Every cut either fails cleanly or (at a plane boundary) reads fewer planes.
  for (size_t n = 0; n < bytes.size(); n += 1 + bytes.size() / 500) {
    absl::StatusOr<HostTrace> r = ReadXSpaceHost(StringByteSource(bytes.substr(0, n)), "h", 0);
    EXPECT_THAT(r.status().code(), AnyOf(absl::StatusCode::kOk, absl::StatusCode::kDataLoss,
                                         absl::StatusCode::kInvalidArgument))
        << "cut at " << n << ": " << r.status();
  }
}

// Random damage: never a crash or a sanitizer report, always a result or a clear error.
TEST(XSpaceWireTest, CorruptBytesNeverCrash) {
  const std::string bytes = SyntheticSpace().SerializeAsString();
  std::mt19937_64 rng(42);
  int ok = 0;
  int failed = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string damaged = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      damaged[rng() % damaged.size()] = static_cast<char>(rng());
    }
    absl::StatusOr<HostTrace> r = ReadXSpaceHost(StringByteSource(damaged), "h", 0);
    if (r.ok()) {
      ++ok;
      for (const DeviceTrace& d : r->devices) {
        for (const Op& o : d.ops) EXPECT_LE(o.start_ns, o.end_ns);
      }
      for (const Op& o : r->host_ops) EXPECT_LE(o.start_ns, o.end_ns);
    } else {
      ++failed;
      EXPECT_THAT(r.status().code(),
                  AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument))
          << r.status();
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  // Both outcomes happen: the damage reaches structure and values.
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
}

TEST(XSpaceWireTest, FileThatShrinksWhileReadIsAnError) {
  testkit::TempDir dir;
  const std::string bytes = SyntheticSpace().SerializeAsString();
  const std::string path = WriteTemp(dir, bytes);
  absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(path, 4096);
  ASSERT_THAT(file, IsOk());
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(bytes.size() / 2)), 0);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(**file, "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr("shrank"));
  EXPECT_THAT(t.status().message(), HasSubstr(path));
}

// A source that claims more than a protobuf message can hold.
class HugeSource : public ByteSource {
 public:
  uint64_t size() const override { return uint64_t{3} << 30; }
  std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> Open(uint64_t,
                                                                  uint64_t) const override {
    return std::make_unique<google::protobuf::io::ArrayInputStream>("", 0);
  }
};

TEST(XSpaceWireTest, OverTwoGibIsRefused) {
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(HugeSource(), "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("over the 2 GiB limit"));
}

TEST(ByteSourceTest, RangesAreClampedAndErrorsNamed) {
  testkit::TempDir dir;
  const std::string path = WriteTemp(dir, "0123456789");
  absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(path, 3);
  ASSERT_THAT(file, IsOk());
  EXPECT_EQ((*file)->size(), 10u);
  auto read_all = [](const ByteSource& source, uint64_t offset, uint64_t length) {
    std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> in = source.Open(offset, length);
    std::string out;
    const void* data = nullptr;
    int size = 0;
    while (in->Next(&data, &size)) out.append(static_cast<const char*>(data), size);
    return out;
  };
  EXPECT_EQ(read_all(**file, 2, 5), "23456");
  EXPECT_EQ(read_all(**file, 8, 100), "89");
  EXPECT_EQ(read_all(**file, 50, 5), "");
  EXPECT_THAT((*file)->status(), IsOk());
  const std::string text = "abcdef";
  EXPECT_EQ(read_all(StringByteSource(text), 4, 10), "ef");

  EXPECT_THAT(FileByteSource::OpenFile(absl::StrCat(dir.path(), "/missing")).status().message(),
              HasSubstr("cannot open"));
  EXPECT_THAT(FileByteSource::OpenFile(dir.path()).status().message(),
              HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace profctl::analysis
