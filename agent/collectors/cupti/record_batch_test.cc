#include "agent/collectors/cupti/record_batch.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inject/record_batch_writer.h"
#include "inject/records.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent::cupti {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string Bytes(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// A batch with one record of each kind.
std::string SampleBatch() {
  inject::RecordBatchWriter w(/*max_bytes=*/1 << 20);
  inject::KernelRecord k;
  k.start_ns = 100;
  k.end_ns = 200;
  k.correlation_id = 7;
  k.name = w.Intern("square(float*, int)");
  EXPECT_TRUE(w.Add(k));
  inject::MemcpyRecord c;
  c.start_ns = 10;
  c.end_ns = 20;
  c.bytes = 4096;
  c.copy_kind = 1;
  EXPECT_TRUE(w.Add(c));
  inject::MemsetRecord s;
  s.start_ns = 30;
  s.end_ns = 40;
  EXPECT_TRUE(w.Add(s));
  inject::ApiRecord a;
  a.start_ns = 5;
  a.end_ns = 9;
  a.domain = static_cast<uint8_t>(inject::ApiDomain::kRuntime);
  a.name = w.Intern("cudaLaunchKernel");
  EXPECT_TRUE(w.Add(a));
  inject::NvtxRangeRecord r;
  r.start_ns = 1;
  r.end_ns = 300;
  r.name = w.Intern("train_step 3");
  EXPECT_TRUE(w.Add(r));
  inject::MemoryRecord m;
  m.timestamp_ns = 50;
  m.bytes = 1 << 20;
  m.operation = static_cast<uint8_t>(inject::MemoryOperation::kAllocation);
  EXPECT_TRUE(w.Add(m));
  inject::DeviceRecord d;
  d.name = w.Intern("NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(w.Add(d));
  inject::SynchronizationRecord y;
  y.start_ns = 60;
  y.end_ns = 250;
  y.correlation_id = 8;
  y.context_id = 1;
  y.stream_id = 13;
  y.type = static_cast<uint8_t>(inject::SyncType::kStreamSynchronize);
  EXPECT_TRUE(w.Add(y));
  return Bytes(w.Finish(/*pid=*/42, /*gpu_minus_wall_ns=*/-5, /*extra_dropped=*/3));
}

inject::BatchHeader HeaderOf(const std::string& bytes) {
  inject::BatchHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}
void SetHeader(std::string* bytes, const inject::BatchHeader& h) {
  std::memcpy(bytes->data(), &h, sizeof(h));
}

TEST(RecordBatchTest, RoundTrip) {
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(SampleBatch());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->pid, 42u);
  EXPECT_EQ(b->gpu_minus_wall_ns, -5);
  EXPECT_EQ(b->dropped_records, 3u);
  ASSERT_THAT(b->kernels, SizeIs(1));
  EXPECT_EQ(b->String(b->kernels[0].name), "square(float*, int)");
  EXPECT_EQ(b->kernels[0].correlation_id, 7u);
  EXPECT_THAT(b->memcpys, SizeIs(1));
  EXPECT_EQ(b->memcpys[0].bytes, 4096u);
  EXPECT_THAT(b->memsets, SizeIs(1));
  ASSERT_THAT(b->apis, SizeIs(1));
  EXPECT_EQ(b->String(b->apis[0].name), "cudaLaunchKernel");
  ASSERT_THAT(b->ranges, SizeIs(1));
  EXPECT_EQ(b->String(b->ranges[0].name), "train_step 3");
  EXPECT_EQ(b->String(b->ranges[0].domain), "");
  EXPECT_THAT(b->memory, SizeIs(1));
  EXPECT_THAT(b->devices, SizeIs(1));
  ASSERT_THAT(b->syncs, SizeIs(1));
  EXPECT_EQ(b->syncs[0].start_ns, 60u);
  EXPECT_EQ(b->syncs[0].end_ns, 250u);
  EXPECT_EQ(b->syncs[0].correlation_id, 8u);
  EXPECT_EQ(b->syncs[0].context_id, 1u);
  EXPECT_EQ(b->syncs[0].stream_id, 13u);
  EXPECT_EQ(b->syncs[0].cuda_event_id, inject::kSyncNotApplicable);
  EXPECT_EQ(b->syncs[0].type, static_cast<uint8_t>(inject::SyncType::kStreamSynchronize));
  EXPECT_THAT(b->strings, SizeIs(4));
  EXPECT_EQ(b->unknown_records, 0);
}

TEST(RecordBatchTest, EmptyBatch) {
  inject::RecordBatchWriter w(4096);
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(Bytes(w.Finish(1, 0, 0)));
  ASSERT_THAT(b, IsOk());
  EXPECT_TRUE(b->kernels.empty());
  EXPECT_TRUE(b->strings.empty());
}

TEST(RecordBatchTest, WriterInternsOnceAndResetsOnFinish) {
  inject::RecordBatchWriter w(4096);
  EXPECT_EQ(w.Intern("a"), 0u);
  EXPECT_EQ(w.Intern("b"), 1u);
  EXPECT_EQ(w.Intern("a"), 0u);
  EXPECT_EQ(w.Intern(""), inject::kNoString);
  (void)w.Finish(1, 0, 0);
  EXPECT_EQ(w.Intern("b"), 0u);
  EXPECT_EQ(w.record_count(), 0u);
}

TEST(RecordBatchTest, WriterDropsWhatDoesNotFitAndCountsIt) {
  inject::RecordBatchWriter w(sizeof(inject::BatchHeader) + 2 * sizeof(inject::KernelRecord));
  inject::KernelRecord k;
  EXPECT_TRUE(w.Add(k));
  EXPECT_TRUE(w.Add(k));
  EXPECT_FALSE(w.Add(k));
  EXPECT_EQ(w.Intern("no room"), inject::kNoString);
  EXPECT_EQ(w.dropped_records(), 1u);
  EXPECT_EQ(w.dropped_strings(), 1u);
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(Bytes(w.Finish(1, 0, /*extra_dropped=*/10)));
  ASSERT_THAT(b, IsOk());
  EXPECT_THAT(b->kernels, SizeIs(2));
  EXPECT_EQ(b->dropped_records, 11u);
}

TEST(RecordBatchTest, WriterCutsLongStrings) {
  inject::RecordBatchWriter w(1 << 20);
  const uint32_t i = w.Intern(std::string(inject::kMaxStringBytes + 100, 'x'));
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(Bytes(w.Finish(1, 0, 0)));
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->String(i).size(), inject::kMaxStringBytes);
}

TEST(RecordBatchTest, EveryTruncationFails) {
  const std::string bytes = SampleBatch();
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<RecordBatch> b = ParseRecordBatch(bytes.substr(0, n));
    EXPECT_FALSE(b.ok()) << n;
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(RecordBatchTest, EveryByteFlipIsSafe) {
  // No flip may crash or trip a sanitizer; most are caught.
  const std::string bytes = SampleBatch();
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    (void)ParseRecordBatch(bad);
  }
}

TEST(RecordBatchTest, RejectsBadHeaders) {
  const std::string good = SampleBatch();
  auto with = [&](auto edit) {
    std::string bytes = good;
    inject::BatchHeader h = HeaderOf(bytes);
    edit(h);
    SetHeader(&bytes, h);
    return ParseRecordBatch(bytes).status();
  };
  EXPECT_THAT(with([](auto& h) { h.magic = 0x12345678; }).message(), HasSubstr("magic"));
  EXPECT_THAT(with([](auto& h) { h.version = 2; }).message(), HasSubstr("unknown version 2"));
  EXPECT_THAT(with([](auto& h) { h.header_size = 8; }).message(), HasSubstr("header_size"));
  EXPECT_THAT(with([](auto& h) { h.header_size = 0xfff8; }).message(), HasSubstr("header_size"));
  EXPECT_THAT(with([](auto& h) { h.record_count = 0xffffffff; }).message(),
              HasSubstr("record_count 4294967295"));
  EXPECT_THAT(with([](auto& h) { h.string_count = 0xffffffff; }).message(),
              HasSubstr("string_count 4294967295"));
  EXPECT_THAT(with([](auto& h) { h.string_table_bytes += 8; }).message(),
              HasSubstr("do not add up"));
  EXPECT_THAT(with([](auto& h) { h.record_bytes = ~uint64_t{0}; }).message(),
              HasSubstr("do not add up"));
}

TEST(RecordBatchTest, RejectsOversizedInputWithoutReadingIt) {
  const char byte = 0;
  // Only the size is looked at: the parser must refuse before touching the bytes.
  const absl::string_view huge(&byte, kMaxRecordBatchBytes + 1);
  EXPECT_THAT(ParseRecordBatch(huge).status().message(), HasSubstr("exceed the limit"));
}

// A batch of one hand-written record (string table empty).
std::string OneRecordBatch(const void* record, size_t size, uint32_t strings = 0,
                           const std::string& table = "") {
  inject::BatchHeader h;
  h.header_size = sizeof(h);
  h.record_count = 1;
  h.string_count = strings;
  h.string_table_bytes = static_cast<uint32_t>(table.size());
  h.record_bytes = size;
  std::string bytes(sizeof(h), '\0');
  SetHeader(&bytes, h);
  bytes += table;
  bytes.append(static_cast<const char*>(record), size);
  return bytes;
}

TEST(RecordBatchTest, RejectsBadRecords) {
  inject::KernelRecord k;
  k.name = 0;  // no strings
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("kernel name string index 0 is past the table of 0"));
  k.name = inject::kNoString;
  k.start_ns = 10;
  k.end_ns = 5;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("end 5 before start 10"));
  k.end_ns = ~uint64_t{0};
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("too large"));
  k.end_ns = 20;
  k.header.size = 12;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("record size 12"));
  k.header.size = 72;  // a multiple of 8, but short of the struct
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("needs 80"));
  k.header.size = 88;  // past the batch
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&k, sizeof(k))).status().message(),
              HasSubstr("runs past the batch"));
  inject::ApiRecord a;
  a.domain = 9;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&a, sizeof(a))).status().message(),
              HasSubstr("API domain 9"));
  inject::MemoryRecord m;
  m.operation = 0;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&m, sizeof(m))).status().message(),
              HasSubstr("memory operation 0"));
  inject::SynchronizationRecord y;
  y.start_ns = 10;
  y.end_ns = 5;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&y, sizeof(y))).status().message(),
              HasSubstr("end 5 before start 10"));
  y.end_ns = ~uint64_t{0};
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&y, sizeof(y))).status().message(),
              HasSubstr("too large"));
  y.end_ns = 20;
  y.header.size = 40;  // a multiple of 8, but short of the struct
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&y, sizeof(y))).status().message(),
              HasSubstr("record kind 8 of 40 bytes, needs 48"));
  y.header.size = 56;  // past the batch
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&y, sizeof(y))).status().message(),
              HasSubstr("runs past the batch"));
  // CUPTI's type is kept whatever its value (a newer CUPTI may add types).
  y.header.size = sizeof(y);
  y.type = 200;
  absl::StatusOr<RecordBatch> kept = ParseRecordBatch(OneRecordBatch(&y, sizeof(y)));
  ASSERT_THAT(kept, IsOk());
  ASSERT_THAT(kept->syncs, SizeIs(1));
  EXPECT_EQ(kept->syncs[0].type, 200);
  // A string entry longer than the table.
  const std::string table("\xff\x00\x00\x00", 4);
  inject::DeviceRecord d;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&d, sizeof(d), 1, table)).status().message(),
              HasSubstr("runs past the string table"));
}

TEST(RecordBatchTest, SkipsUnknownKindsAndReadsLongerRecords) {
  // Forward compatibility within a version: a new kind, and a kernel record grown by 8 bytes.
  struct Grown {
    inject::KernelRecord k;
    uint64_t extra = 0;
  } grown;
  grown.k.header.size = sizeof(Grown);
  grown.k.start_ns = 1;
  grown.k.end_ns = 2;
  inject::RecordHeader unknown{/*kind=*/999, /*size=*/16, 0};
  std::string records(reinterpret_cast<const char*>(&grown), sizeof(grown));
  records.append(reinterpret_cast<const char*>(&unknown), sizeof(unknown));
  records.append(8, '\0');
  inject::BatchHeader h;
  h.header_size = sizeof(h);
  h.record_count = 2;
  h.record_bytes = records.size();
  std::string bytes(sizeof(h), '\0');
  SetHeader(&bytes, h);
  bytes += records;
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(bytes);
  ASSERT_THAT(b, IsOk());
  ASSERT_THAT(b->kernels, SizeIs(1));
  EXPECT_EQ(b->kernels[0].end_ns, 2u);
  EXPECT_EQ(b->unknown_records, 1);
}

TEST(RecordBatchTest, DeviceRecordsWithAndWithoutUuids) {
  inject::DeviceRecord d;
  d.device_id = 1;
  d.sm_count = 132;
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<uint8_t>(0xA0 + i);
  d.flags = inject::kDeviceHasUuid;
  absl::StatusOr<RecordBatch> full = ParseRecordBatch(OneRecordBatch(&d, sizeof(d)));
  ASSERT_THAT(full, IsOk());
  ASSERT_THAT(full->devices, SizeIs(1));
  EXPECT_EQ(full->devices[0].flags, inject::kDeviceHasUuid);
  EXPECT_EQ(full->devices[0].uuid[15], 0xAF);
  EXPECT_EQ(full->devices[0].sm_count, 132u);

  // An older library's record: the 64-byte prefix, no UUID.
  inject::DeviceRecord old = d;
  old.header.size = inject::kDeviceRecordMinSize;
  absl::StatusOr<RecordBatch> b =
      ParseRecordBatch(OneRecordBatch(&old, inject::kDeviceRecordMinSize));
  ASSERT_THAT(b, IsOk());
  ASSERT_THAT(b->devices, SizeIs(1));
  EXPECT_EQ(b->devices[0].device_id, 1u);
  EXPECT_EQ(b->devices[0].sm_count, 132u);
  EXPECT_EQ(b->devices[0].flags, 0u);
  EXPECT_EQ(b->devices[0].uuid[0], 0);
  EXPECT_EQ(b->devices[0].header.size, inject::kDeviceRecordMinSize);
  // Cut inside the UUIDs: what is there is read, flags are absent.
  old.header.size = 72;
  b = ParseRecordBatch(OneRecordBatch(&old, 72));
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->devices[0].flags, 0u);
  // Shorter than the first version is refused.
  old.header.size = 56;
  EXPECT_THAT(ParseRecordBatch(OneRecordBatch(&old, 56)).status().message(),
              HasSubstr("record kind 7 of 56 bytes, needs 64"));
  // A newer, longer record: its prefix.
  struct Grown {
    inject::DeviceRecord d;
    uint64_t extra = 0;
  } grown;
  grown.d = d;
  grown.d.header.size = sizeof(Grown);
  b = ParseRecordBatch(OneRecordBatch(&grown, sizeof(grown)));
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->devices[0].flags, inject::kDeviceHasUuid);
  EXPECT_EQ(b->devices[0].uuid[0], 0xA0);
}

}  // namespace
}  // namespace profctl::agent::cupti
