#include "agent/collectors/cupti/cupti_collector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/inject_test_util.h"
#include "tests/fake_clock.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;

namespace profctl::agent::cupti {
namespace {

using inject::StatusCode;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using testing_util::FakeProcess;
using testing_util::TempDir;

using ::profctl::test_time::kSec;

const XPlane* FindPlane(const XSpace& space, absl::string_view name) {
  for (const XPlane& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

bool HasEntry(const google::protobuf::RepeatedPtrField<std::string>& entries,
              absl::string_view needle) {
  for (const std::string& e : entries) {
    if (absl::StrContains(e, needle)) return true;
  }
  return false;
}

class CuptiCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InjectServerOptions options;
    options.socket_path = dir_.path() + "/agent.sock";
    options.max_connections_per_peer = 1000;  // every fake process is this test's pid
    absl::StatusOr<std::unique_ptr<InjectServer>> s = InjectServer::Start(options);
    ASSERT_THAT(s, IsOk());
    server_ = *std::move(s);
  }
  // `gpus_dir`: the host's GPU table (host_gpus.h); by default one that does not exist.
  std::unique_ptr<CuptiCollector> MakeCollector(int64_t skew_ns = 0, std::string gpus_dir = "") {
    CuptiCollectorOptions options;
    options.nvidia_gpus_dir = gpus_dir.empty() ? dir_.path() + "/no-nvidia-driver" : gpus_dir;
    options.hostname = "gpu-host";
    options.clock_skew_ns = skew_ns;
    options.flush_timeout_ms = 10'000;
    // The fake processes answer nothing they are not told to (SnapshotAsksEveryProcess... does).
    options.snapshot_pending_wait_ms = pending_wait_ms_;
    return std::make_unique<CuptiCollector>(server_.get(), options, &clock_);
  }
  std::unique_ptr<FakeProcess> Connect(uint32_t pid, int rank) {
    auto p = std::make_unique<FakeProcess>(server_->socket_path());
    p->Register(pid, rank);
    return p;
  }
  struct TwoRanks {
    std::unique_ptr<FakeProcess> a, b;
    uint64_t token = 0;
    int64_t window_start = 0;
  };
  // Ranks 0 and 1 (pids 1 and 2) register with these CUDA_VISIBLE_DEVICES; then `collector`
  // runs a 1 s window from now that both enable. Their flushes are left to the test.
  void RunTwoRankWindow(CuptiCollector* collector, const std::string& visible_a,
                        const std::string& visible_b, TwoRanks* out) {
    out->a = std::make_unique<FakeProcess>(server_->socket_path());
    out->a->Register(1, 0, visible_a);
    out->b = std::make_unique<FakeProcess>(server_->socket_path());
    out->b->Register(2, 1, visible_b);
    ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
    out->window_start = clock_.WallNs();
    ASSERT_THAT(collector->Prepare({"s", 0, kSec}), IsOk());
    out->token = out->a->ExpectEnable().token;
    out->b->ExpectEnable();
    out->a->SendStatus(out->token, StatusCode::kEnabled);
    out->b->SendStatus(out->token, StatusCode::kEnabled);
    ASSERT_THAT(collector->Start(out->window_start), IsOk());
    ASSERT_THAT(collector->Stop(out->window_start + kSec), IsOk());
  }

  TempDir dir_;
  int64_t pending_wait_ms_ = 0;  // MakeCollector's snapshot_pending_wait_ms
  testkit::FakeClock clock_;
  std::unique_ptr<InjectServer> server_;
};

TEST_F(CuptiCollectorTest, TwoProcessesOneHeldByAnotherSubscriber) {
  auto collector = MakeCollector();
  auto a = Connect(101, 0);
  auto b = Connect(102, 1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->Prepare({"sess", w + kSec, 5 * kSec}), IsOk());
  const inject::EnableMessage e = a->ExpectEnable();
  EXPECT_EQ(e.start_wall_ns, w + kSec);
  EXPECT_EQ(e.end_wall_ns, w + 6 * kSec + 2 * kSec);  // planned end + end_slack_ms
  EXPECT_EQ(inject::GetText(e.session_id), "sess");
  b->ExpectEnable();
  constexpr int64_t kOffset = 123'456;  // this process's GPU clock - CLOCK_REALTIME
  a->SendStatus(e.token, StatusCode::kEnabled, w + kSec, kOffset);
  b->SendStatus(e.token, StatusCode::kUnavailable, 0, 0,
                "held by another CUPTI subscriber (CUPTI for torch.profiler)");
  ASSERT_THAT(collector->Start(w + kSec), IsOk());
  ASSERT_THAT(collector->Stop(w + 6 * kSec), IsOk());
  const uint64_t gpu_start = static_cast<uint64_t>(w + 2 * kSec + kOffset);
  a->AnswerDisableAndFlush(e.token,
                           {FakeProcess::SmallBatch(101, gpu_start, gpu_start + 5'000, kOffset)},
                           /*dropped=*/3);
  b->AnswerDisableAndFlush(e.token, {});
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  const XPlane* gpu = FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  ASSERT_EQ(gpu->lines(0).events_size(), 1);
  const auto& line = gpu->lines(0);
  // Calibrated onto the agent's clock: 1 s after the profile start.
  EXPECT_EQ(line.timestamp_ns() + line.events(0).offset_ps() / 1000, kSec);
  EXPECT_EQ(line.events(0).duration_ps(), 5'000'000);
  EXPECT_TRUE(HasEntry(space.errors(),
                       "cupti pid 102 (rank 1): GPU tracing unavailable: held by "
                       "another CUPTI subscriber (CUPTI for torch.profiler)"))
      << space.DebugString();
  EXPECT_TRUE(HasEntry(space.warnings(), "cupti pid 101 (rank 0): 3 GPU activity records"));
}

TEST_F(CuptiCollectorTest, RawBatchesAreReleasedAsTheyAreParsed) {
  auto collector = MakeCollector();
  TwoRanks ranks;
  ASSERT_NO_FATAL_FAILURE(RunTwoRankWindow(collector.get(), "0", "1", &ranks));
  const uint64_t t = static_cast<uint64_t>(ranks.window_start + 1000);
  std::vector<std::vector<uint8_t>> batches;
  for (int i = 0; i < 16; ++i) batches.push_back(FakeProcess::SmallBatch(1, t, t + 500));
  ranks.a->AnswerDisableAndFlush(ranks.token, batches);
  ranks.b->AnswerDisableAndFlush(ranks.token, batches);
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  const CuptiCollector::CollectAccounting& a = collector->last_collect();
  int64_t sent = 0;
  for (const auto& b : batches) sent += 2 * static_cast<int64_t>(b.size());
  EXPECT_EQ(a.received_bytes, sent);
  // Raw and parsed copies of the whole window are never held together: at most the larger of
  // the two and one batch of each, never their sum.
  const int64_t one_raw = static_cast<int64_t>(batches[0].size());
  const int64_t one_parsed = HeldBytes(*ParseRecordBatch(
      absl::string_view(reinterpret_cast<const char*>(batches[0].data()), batches[0].size())));
  const int64_t parsed = 32 * one_parsed;
  EXPECT_LE(a.peak_record_bytes, std::max(sent, parsed) + one_raw + one_parsed)
      << "raw " << sent << ", parsed " << parsed;
  EXPECT_LT(a.peak_record_bytes, sent + parsed - one_raw - one_parsed);
}

TEST_F(CuptiCollectorTest, CalibratesAroundTheAgentsClockSkew) {
  constexpr int64_t kSkew = 3 * kSec;  // agent wall = CLOCK_REALTIME + 3 s
  auto collector = MakeCollector(kSkew);
  auto a = Connect(7, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->Prepare({"s", w + kSec, kSec}), IsOk());
  const inject::EnableMessage e = a->ExpectEnable();
  EXPECT_EQ(e.start_wall_ns, w + kSec - kSkew);  // the process's clock
  a->SendStatus(e.token, StatusCode::kEnabled);
  ASSERT_THAT(collector->Start(w + kSec), IsOk());
  ASSERT_THAT(collector->Stop(w + 2 * kSec), IsOk());
  // GPU clock == CLOCK_REALTIME here; the event is at agent time w + 1.5 s.
  const auto real = static_cast<uint64_t>(w + kSec + kSec / 2 - kSkew);
  a->AnswerDisableAndFlush(e.token, {FakeProcess::SmallBatch(7, real, real + 1'000, 0)});
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  const XPlane* gpu = FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  const auto& line = gpu->lines(0);
  EXPECT_EQ(line.timestamp_ns() + line.events(0).offset_ps() / 1000, kSec / 2);
  EXPECT_TRUE(space.errors().empty()) << space.DebugString();
}

TEST_F(CuptiCollectorTest, RanksThatEachSeeOneGpuLandOnTheirOwnPlanes) {
  auto collector = MakeCollector();
  TwoRanks r;
  ASSERT_NO_FATAL_FAILURE(RunTwoRankWindow(collector.get(), "2", "3", &r));
  const auto t = static_cast<uint64_t>(r.window_start + kSec / 2);
  r.a->AnswerDisableAndFlush(r.token, {FakeProcess::SmallBatch(1, t, t + 100)});  // device 0
  r.b->AnswerDisableAndFlush(r.token, {FakeProcess::SmallBatch(2, t, t + 100)});  // device 0
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  EXPECT_EQ(FindPlane(space, "/device:GPU:0"), nullptr);
  EXPECT_NE(FindPlane(space, "/device:GPU:2"), nullptr);
  EXPECT_NE(FindPlane(space, "/device:GPU:3"), nullptr);
}

TEST(RemapVisibleDevicesTest, OnlyPlainIndexListsAreMapped) {
  RecordBatch batch;
  batch.kernels.resize(3);
  batch.kernels[0].device_id = 0;
  batch.kernels[1].device_id = 1;
  batch.kernels[2].device_id = 5;  // past the list: kept
  batch.devices.resize(1);
  RemapVisibleDevices(" 4, 6", &batch);
  EXPECT_EQ(batch.kernels[0].device_id, 4u);
  EXPECT_EQ(batch.kernels[1].device_id, 6u);
  EXPECT_EQ(batch.kernels[2].device_id, 5u);
  EXPECT_EQ(batch.devices[0].device_id, 4u);
  for (const char* kept :
       {"", "GPU-8f6e3c1a-1111-2222-3333-444455556666", "MIG-abc", "1,x", "-1", "1,,2"}) {
    RecordBatch b;
    b.kernels.resize(1);
    b.kernels[0].device_id = 0;
    RemapVisibleDevices(kept, &b);
    EXPECT_EQ(b.kernels[0].device_id, 0u) << kept;
  }
}

// Four GPUs as /proc/driver/nvidia/gpus shows them, written out of PCI bus order.
constexpr char kUuid0[] = "GPU-11111111-2222-3333-4444-555555555555";
constexpr char kUuid1[] = "GPU-5f1c1234-89ab-cdef-0123-456789abcdef";
constexpr char kUuid2[] = "GPU-5f1d0000-0000-0000-0000-000000000002";
constexpr char kUuid3[] = "GPU-a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f";
constexpr char kUnknownUuid[] = "GPU-deadbeef-0000-0000-0000-000000000000";
constexpr char kMigUuid[] = "MIG-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";

std::string WriteFakeGpus(const std::string& root) {
  const std::string gpus = root + "/proc/driver/nvidia/gpus";
  const std::pair<const char*, const char*> table[] = {{"0000:b1:00.0", kUuid3},
                                                       {"0000:1a:00.0", kUuid0},
                                                       {"0000:86:00.0", kUuid2},
                                                       {"0000:3b:00.0", kUuid1}};
  for (const auto& [bus, uuid] : table) {
    const std::string dir = gpus + "/" + bus;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/information")
        << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 77\nGPU UUID: \t " << uuid
        << "\nBus Location: \t " << bus << "\nDevice Minor: \t 0\n";
  }
  return gpus;
}

inject::DeviceRecord Device(uint32_t ordinal, const char* uuid, const char* mig_uuid = nullptr) {
  inject::DeviceRecord d;
  d.device_id = ordinal;
  d.sm_count = 132;
  if (uuid != nullptr) {
    const GpuUuid u = *ParseGpuUuid(uuid);
    std::copy(u.begin(), u.end(), d.uuid);
    d.flags |= inject::kDeviceHasUuid;
  }
  if (mig_uuid != nullptr) {
    const GpuUuid u = *ParseGpuUuid(absl::string_view(mig_uuid).substr(4));
    std::copy(u.begin(), u.end(), d.mig_uuid);
    d.flags |= inject::kDeviceIsMig;
  }
  return d;
}

// A batch of process `pid`: a kernel on `ordinal` at [t, t + 100) with its launch just before,
// and `device` if given.
std::vector<uint8_t> DeviceBatch(uint32_t pid, uint32_t ordinal, uint64_t t,
                                 const inject::DeviceRecord* device) {
  static uint32_t next_correlation = 1;
  inject::RecordBatchWriter writer(1 << 20);
  if (device != nullptr) writer.Add(*device);
  inject::ApiRecord a;
  a.start_ns = t - 50;
  a.end_ns = t - 40;
  a.pid = pid;
  a.tid = pid;
  a.correlation_id = next_correlation++;
  a.domain = static_cast<uint8_t>(inject::ApiDomain::kRuntime);
  a.name = writer.Intern("cudaLaunchKernel");
  writer.Add(a);
  inject::KernelRecord k;
  k.correlation_id = a.correlation_id;
  k.start_ns = t;
  k.end_ns = t + 100;
  k.device_id = ordinal;
  k.stream_id = 7;
  k.name = writer.Intern("matmul_kernel");
  writer.Add(k);
  return writer.Finish(pid, 0, 0);
}

RecordBatch ParsedBatch(uint32_t ordinal, std::optional<inject::DeviceRecord> device) {
  RecordBatch b;
  b.kernels.resize(1);
  b.kernels[0].device_id = ordinal;
  if (device) b.devices.push_back(*device);
  return b;
}

TEST_F(CuptiCollectorTest, RanksPlacedByTheirDevicesUuids) {
  const std::string gpus = WriteFakeGpus(dir_.path());
  auto collector = MakeCollector(0, gpus);
  // Both see their GPU as ordinal 0. The first's CUDA_VISIBLE_DEVICES is a UUID (the device
  // plugin's), the second's a plain index that disagrees with its UUID: the UUID wins.
  TwoRanks r;
  ASSERT_NO_FATAL_FAILURE(RunTwoRankWindow(collector.get(), kUuid2, "3", &r));
  const auto t = static_cast<uint64_t>(r.window_start + kSec / 2);
  const inject::DeviceRecord da = Device(0, kUuid2), db = Device(0, kUuid1);
  // The device record in the first batch maps the kernels of later ones too.
  r.a->AnswerDisableAndFlush(r.token,
                             {DeviceBatch(1, 0, t, &da), DeviceBatch(1, 0, t + 200, nullptr)});
  r.b->AnswerDisableAndFlush(r.token, {DeviceBatch(2, 0, t, &db)});
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  EXPECT_EQ(FindPlane(space, "/device:GPU:0"), nullptr) << space.DebugString();
  EXPECT_EQ(FindPlane(space, "/device:GPU:3"), nullptr);
  const XPlane* p1 = FindPlane(space, "/device:GPU:1");
  const XPlane* p2 = FindPlane(space, "/device:GPU:2");
  ASSERT_NE(p1, nullptr);
  ASSERT_NE(p2, nullptr);
  ASSERT_EQ(p2->lines_size(), 1);
  EXPECT_EQ(p2->lines(0).events_size(), 2);
  EXPECT_EQ(p1->lines(0).events_size(), 1);
  EXPECT_TRUE(space.warnings().empty()) << space.DebugString();
  EXPECT_TRUE(space.errors().empty()) << space.DebugString();
}

TEST_F(CuptiCollectorTest, MigDeviceKeepsItsOrdinalWithOneWarning) {
  const std::string gpus = WriteFakeGpus(dir_.path());
  auto collector = MakeCollector(0, gpus);
  auto a = std::make_unique<FakeProcess>(server_->socket_path());
  a->Register(5, 0, kMigUuid);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->Prepare({"s", 0, kSec}), IsOk());
  const uint64_t token = a->ExpectEnable().token;
  a->SendStatus(token, StatusCode::kEnabled);
  ASSERT_THAT(collector->Start(w), IsOk());
  ASSERT_THAT(collector->Stop(w + kSec), IsOk());
  const auto t = static_cast<uint64_t>(w + kSec / 2);
  // CUPTI gave a UUID this host's table does not hold (the instance's, not its parent's).
  const inject::DeviceRecord d = Device(0, kUnknownUuid, kMigUuid);
  a->AnswerDisableAndFlush(token, {DeviceBatch(5, 0, t, &d), DeviceBatch(5, 0, t + 200, &d)});
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  EXPECT_NE(FindPlane(space, "/device:GPU:0"), nullptr);
  ASSERT_EQ(space.warnings_size(), 1) << space.DebugString();
  EXPECT_EQ(space.warnings(0),
            absl::StrCat("cupti pid 5 (rank 0): device 0 (UUID ", kMigUuid,
                         ") is not a GPU of this host's table; its plane keeps the process's "
                         "ordinal"));
}

TEST(MapProcessDevicesTest, UuidsFirstThenVisibleDevices) {
  TempDir dir;
  absl::StatusOr<HostGpuTable> host = ReadHostGpus(WriteFakeGpus(dir.path()));
  ASSERT_THAT(host, IsOk());
  ASSERT_EQ(host->gpus().size(), 4u);
  {  // UUIDs of two ordinals; the visible list is ignored for them.
    const std::vector<RecordBatch> batches = {ParsedBatch(0, Device(0, kUuid3)),
                                              ParsedBatch(1, Device(1, kUuid0))};
    const ProcessDeviceMap m = MapProcessDevices("1,2", batches, *host);
    EXPECT_EQ(m.host_index.at(0), 3u);
    EXPECT_EQ(m.host_index.at(1), 0u);
    EXPECT_TRUE(m.warnings.empty());
  }
  {  // An old library (no UUIDs): the visible list, as UUIDs, a unique prefix, an index, and the
     // old MIG form naming its parent GPU.
    std::vector<RecordBatch> batches;
    for (uint32_t i = 0; i < 4; ++i) batches.push_back(ParsedBatch(i, Device(i, nullptr)));
    const ProcessDeviceMap m = MapProcessDevices(
        absl::StrCat(kUuid1, ", gpu-A0B1,0,MIG-", kUuid2, "/1/0"), batches, *host);
    EXPECT_EQ(m.host_index.at(0), 1u);
    EXPECT_EQ(m.host_index.at(1), 3u);
    EXPECT_EQ(m.host_index.at(2), 0u);
    EXPECT_EQ(m.host_index.at(3), 2u);
    EXPECT_TRUE(m.warnings.empty());
    RecordBatch b = batches[1];
    ApplyDeviceMap(m, &b);
    EXPECT_EQ(b.kernels[0].device_id, 3u);
    EXPECT_EQ(b.devices[0].device_id, 3u);
  }
  {  // A UUID the table does not know falls back to the visible list, then keeps the ordinal.
    const std::vector<RecordBatch> batches = {ParsedBatch(0, Device(0, kUnknownUuid)),
                                              ParsedBatch(1, Device(1, kUnknownUuid))};
    const ProcessDeviceMap m = MapProcessDevices("2", batches, *host);
    EXPECT_EQ(m.host_index.at(0), 2u);
    EXPECT_FALSE(m.host_index.contains(1));
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_EQ(m.warnings[0], absl::StrCat("device 1 (UUID ", kUnknownUuid,
                                          ") is not a GPU of this host's table; its plane "
                                          "keeps the process's ordinal"));
  }
  {  // An ambiguous prefix and an unknown MIG instance: kept, named as the process named them.
    const std::vector<RecordBatch> batches = {ParsedBatch(0, std::nullopt),
                                              ParsedBatch(1, std::nullopt)};
    const ProcessDeviceMap m =
        MapProcessDevices(absl::StrCat("GPU-5f1,", kMigUuid), batches, *host);
    EXPECT_TRUE(m.host_index.empty());
    ASSERT_EQ(m.warnings.size(), 2u);
    EXPECT_TRUE(absl::StrContains(m.warnings[0], "device 0 (UUID GPU-5f1)"));
    EXPECT_TRUE(absl::StrContains(m.warnings[1], absl::StrCat("device 1 (UUID ", kMigUuid, ")")));
  }
  {  // A garbage list is not used at all.
    const std::vector<RecordBatch> batches = {ParsedBatch(0, std::nullopt)};
    EXPECT_TRUE(
        MapProcessDevices(absl::StrCat("2,", kUuid1, ",x"), batches, *host).host_index.empty());
  }
}

TEST(MapProcessDevicesTest, NoHostTable) {
  // Without /proc (a container without the driver's files): UUIDs cannot be placed; plain
  // indices still are, and only UUIDs the process itself named warn.
  const HostGpuTable none;
  const std::vector<RecordBatch> batches = {ParsedBatch(0, Device(0, kUuid1)),
                                            ParsedBatch(1, Device(1, kUuid2))};
  ProcessDeviceMap m = MapProcessDevices("", batches, none);
  EXPECT_TRUE(m.host_index.empty());
  EXPECT_TRUE(m.warnings.empty());
  m = MapProcessDevices("4,6", batches, none);
  EXPECT_EQ(m.host_index.at(0), 4u);
  EXPECT_EQ(m.host_index.at(1), 6u);
  m = MapProcessDevices(absl::StrCat(kUuid1, ",", kUuid2), batches, none);
  EXPECT_TRUE(m.host_index.empty());
  EXPECT_EQ(m.warnings.size(), 2u);
}

TEST_F(CuptiCollectorTest, NoProcessIsAWarningNotAFailure) {
  auto collector = MakeCollector();
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->Prepare({"s", 0, kSec}), IsOk());
  ASSERT_THAT(collector->Start(w), IsOk());
  ASSERT_THAT(collector->Stop(w + kSec), IsOk());
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  EXPECT_TRUE(HasEntry(space.warnings(), "no CUDA process is connected"));
  EXPECT_EQ(FindPlane(space, "/device:GPU:0"), nullptr);
}

TEST_F(CuptiCollectorTest, UnusableBatchesAndVanishedProcessesAreErrors) {
  auto collector = MakeCollector();
  auto a = Connect(1, 0);
  auto b = Connect(2, 1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->Prepare({"s", 0, kSec}), IsOk());
  const uint64_t token = a->ExpectEnable().token;
  b->ExpectEnable();
  a->SendStatus(token, StatusCode::kEnabled);
  b->SendStatus(token, StatusCode::kEnabled);
  ASSERT_THAT(collector->Start(w), IsOk());
  b.reset();  // dies
  ASSERT_THAT(collector->Stop(w + kSec), IsOk());
  a->AnswerDisableAndFlush(token, {std::vector<uint8_t>(100, 0xEE)});
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  EXPECT_TRUE(HasEntry(space.errors(), "cupti pid 1 (rank 0): unusable record batch"));
  EXPECT_TRUE(HasEntry(space.errors(), "cupti pid 2 (rank 1): connection lost"));
}

TEST_F(CuptiCollectorTest, LifecycleErrorsAndAbort) {
  auto collector = MakeCollector();
  XSpace space;
  EXPECT_EQ(collector->Collect(&space).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(collector->Stop(1).code(), absl::StatusCode::kFailedPrecondition);
  auto a = Connect(1, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  ASSERT_THAT(collector->Prepare({"s", clock_.WallNs() + kSec, kSec}), IsOk());
  a->ExpectEnable();
  collector->Abort();
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(a->Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(inject::MessageType::kDisable));
  CuptiCollector without(nullptr, {}, &clock_);
  EXPECT_EQ(without.Prepare({"s", 0, kSec}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CuptiCollectorTest, StepSignalFromTwoProcessesOnTheAgentsClock) {
  constexpr int64_t kSkew = -11'000'000;  // agent wall = CLOCK_REALTIME - 11 ms
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector(kSkew);
  EXPECT_TRUE(collector->HasStepSignal());
  auto a = Connect(10, 0);
  auto b = Connect(20, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t r = 1'700'000'000 * kSec;  // the processes' CLOCK_REALTIME
  a->SendSteps({{r, r + 100 * kMs, 5}, {r + 100 * kMs, r + 200 * kMs, 6}});
  b->SendSteps({{r + 60 * kMs, r + 150 * kMs, 40}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(3, absl::Seconds(10)));

  std::vector<StepSample> out = {StepSample{}};  // appended to, not replaced
  collector->RecentSteps(r + kSkew, r + 200 * kMs + kSkew, 10, &out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].end_wall_ns, r + 100 * kMs + kSkew);
  EXPECT_EQ(out[1].duration_ns, 100 * kMs);
  EXPECT_EQ(out[1].step_num, 5);
  EXPECT_EQ(out[1].source, "cupti pid 10 rank 0");
  EXPECT_EQ(out[2].end_wall_ns, r + 150 * kMs + kSkew);
  EXPECT_EQ(out[2].duration_ns, 90 * kMs);
  EXPECT_EQ(out[2].step_num, 40);
  EXPECT_EQ(out[2].source, "cupti pid 20");
  EXPECT_EQ(out[3].step_num, 6);
  // since is exclusive, now inclusive, on the agent's clock.
  out.clear();
  collector->RecentSteps(r + 100 * kMs + kSkew, r + 150 * kMs + kSkew, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 40);
  // The bounds are the agent's: (r+95 ms, r+145 ms] there is (r+106 ms, r+156 ms] in realtime.
  out.clear();
  collector->RecentSteps(r + 95 * kMs, r + 145 * kMs, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 40);
  // The latest `max`, oldest first; extreme bounds do not overflow.
  out.clear();
  collector->RecentSteps(INT64_MIN, INT64_MAX, 2, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step_num, 40);
  EXPECT_EQ(out[1].step_num, 6);
  // During a capture too.
  ASSERT_THAT(collector->Prepare({"s", clock_.WallNs() + kSec, kSec}), IsOk());
  a->ExpectEnable();
  b->ExpectEnable();
  a->SendSteps({{r + 200 * kMs, r + 300 * kMs, 7}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(4, absl::Seconds(10)));
  out.clear();
  collector->RecentSteps(r + 200 * kMs + kSkew, INT64_MAX, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 7);
  collector->Abort();
  // No server: no steps, still a step signal.
  CuptiCollector without(nullptr, {}, &clock_);
  out.clear();
  without.RecentSteps(INT64_MIN, INT64_MAX, 10, &out);
  EXPECT_TRUE(out.empty());
}

// The step events of a snapshot's /host:CPU plane: "<line name or id> <event name> <start> <end>"
// (agent clock), by line then time.
std::vector<std::string> SnapshotSteps(const XSpace& space) {
  std::vector<std::string> out;
  const XPlane* host = FindPlane(space, "/host:CPU");
  if (host == nullptr) return out;
  const int64_t start = xspace::ProfileStartNs(space);
  for (const auto& line : host->lines()) {
    for (const auto& event : line.events()) {
      out.push_back(absl::StrCat(
          line.id(), " ", host->event_metadata().at(event.metadata_id()).name(), " ",
          xspace::EventStartNs(start, line, event), " ", xspace::EventEndNs(start, line, event)));
    }
  }
  return out;
}

TEST_F(CuptiCollectorTest, RecorderKeepsEachProcessesStepsOnItsLineOnTheAgentsClock) {
  constexpr int64_t kSkew = -11'000'000;  // agent wall = CLOCK_REALTIME - 11 ms
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector(kSkew);
  const int64_t r = 1'700'000'000 * kSec;  // the processes' CLOCK_REALTIME
  EXPECT_FALSE(collector->Recording());
  EXPECT_THAT(collector->StartRecorder({.keep_ns = 0, .max_bytes = 1}, r),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, r + kSkew),
              IsOk());
  EXPECT_TRUE(collector->Recording());
  auto a = Connect(10, 0);
  auto b = Connect(20, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  a->SendSteps({{r + 100 * kMs, r + 200 * kMs, 5}, {r + 200 * kMs, r + 300 * kMs, 6}});
  b->SendSteps({{r + 150 * kMs, r + 250 * kMs, 40}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(3, absl::Seconds(10)));
  collector->RecordUntil(r + 300 * kMs + kSkew);
  collector->RecordUntil(r + 300 * kMs + kSkew);  // nothing twice
  EXPECT_EQ(collector->recorder_stats().records, 3);
  // A step that reaches the server after its end was pulled past is still recorded, once.
  b->SendSteps({{r + 50 * kMs, r + 140 * kMs, 39}, {r + 150 * kMs, r + 250 * kMs, 40}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(5, absl::Seconds(10)));
  collector->RecordUntil(r + 400 * kMs + kSkew);
  EXPECT_EQ(collector->recorder_stats().records, 4);

  XSpace space;
  ASSERT_THAT(collector->Snapshot(r + kSkew, r + 400 * kMs + kSkew, &space), IsOk());
  EXPECT_EQ(xspace::ProfileStartNs(space), r + kSkew);
  const int64_t a0 = r + kSkew;
  EXPECT_EQ(
      SnapshotSteps(space),
      (std::vector<std::string>{absl::StrCat("10 step 5 ", a0 + 100 * kMs, " ", a0 + 200 * kMs),
                                absl::StrCat("10 step 6 ", a0 + 200 * kMs, " ", a0 + 300 * kMs),
                                absl::StrCat("20 step 39 ", a0 + 50 * kMs, " ", a0 + 140 * kMs),
                                absl::StrCat("20 step 40 ", a0 + 150 * kMs, " ", a0 + 250 * kMs)}))
      << space.DebugString();
  EXPECT_TRUE(HasEntry(space.warnings(),
                       "keeps the NVTX step ranges and NCCL kernel launches of each CUDA process"));
  EXPECT_FALSE(HasEntry(space.warnings(), "holds the last"));
  EXPECT_TRUE(space.errors().empty()) << space.DebugString();
  // The window cuts: a step partly inside is clipped to it, one outside is left out.
  XSpace cut;
  ASSERT_THAT(collector->Snapshot(a0 + 160 * kMs, a0 + 400 * kMs, &cut), IsOk());
  const std::vector<std::string> steps = SnapshotSteps(cut);
  ASSERT_EQ(steps.size(), 3u) << cut.DebugString();
  EXPECT_EQ(steps[0], absl::StrCat("10 step 5 ", a0 + 160 * kMs, " ", a0 + 200 * kMs));
  EXPECT_EQ(steps[2], absl::StrCat("20 step 40 ", a0 + 160 * kMs, " ", a0 + 250 * kMs));
  // Asking for more than was recorded says how much is held.
  XSpace longer;
  ASSERT_THAT(collector->Snapshot(a0 - 10 * kSec, a0 + 400 * kMs, &longer), IsOk());
  EXPECT_TRUE(HasEntry(longer.warnings(), "holds the last 400 ms only, of 10400 ms asked"))
      << longer.DebugString();
  EXPECT_THAT(collector->Snapshot(a0, a0, &longer), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A snapshot asks the processes for the steps they hold (their step signal sends them only about
// once a second): steps sent only when asked are in it. A process that does not answer (an older
// library) is waited for a bounded time and named in a warning.
TEST_F(CuptiCollectorTest, ASnapshotAsksEveryProcessForTheStepsItHoldsNow) {
  constexpr int64_t kMs = 1'000'000;
  pending_wait_ms_ = 30'000;
  auto collector = MakeCollector();
  const int64_t r = 1'700'000'000 * kSec;
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, r), IsOk());
  auto a = Connect(10, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  auto answer = [](FakeProcess* p, std::vector<inject::StepSampleEntry> steps) {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    for (;;) {  // past the Recorder message it got at registration
      ASSERT_TRUE(p->Read(&type, &payload));
      if (type == static_cast<uint16_t>(inject::MessageType::kSendPending)) break;
    }
    inject::CommandMessage m;
    ASSERT_TRUE(inject::DecodeMessage(payload.data(), payload.size(), &m));
    if (!steps.empty()) p->SendSteps(steps);
    inject::StatusMessage done;
    done.token = m.token;
    done.code = static_cast<uint32_t>(inject::StatusCode::kPendingSent);
    p->Send(inject::MessageType::kStatus, done);
  };
  std::thread t(answer, a.get(),
                std::vector<inject::StepSampleEntry>{{r + 100 * kMs, r + 200 * kMs, 7}});
  XSpace space;
  ASSERT_THAT(collector->Snapshot(r, r + 300 * kMs, &space), IsOk());
  t.join();
  EXPECT_EQ(
      SnapshotSteps(space),
      (std::vector<std::string>{absl::StrCat("10 step 7 ", r + 100 * kMs, " ", r + 200 * kMs)}))
      << space.DebugString();
  EXPECT_FALSE(HasEntry(space.warnings(), "did not send their latest steps"));

  a.reset();
  ASSERT_TRUE(server_->WaitForConnectionsAtMostForTesting(0, absl::Seconds(10)));
  pending_wait_ms_ = 100;
  auto quick = MakeCollector();
  ASSERT_THAT(quick->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, r), IsOk());
  auto old = Connect(20, 1);  // never answers
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  XSpace partial;
  ASSERT_THAT(quick->Snapshot(r, r + 300 * kMs, &partial), IsOk());
  EXPECT_TRUE(HasEntry(partial.warnings(),
                       "cupti: 1 CUDA process(es) did not send their latest steps within 100 ms"))
      << partial.DebugString();
}

// The snapshot's NCCL launches: "tid name start duration kernel_name seq" per launch event.
std::vector<std::string> SnapshotLaunches(const XSpace& space) {
  std::vector<std::string> out;
  const XPlane* host = FindPlane(space, "/host:CPU");
  if (host == nullptr) return out;
  const xspace::XPlaneReader reader(*host);
  const int64_t start = xspace::ProfileStartNs(space);
  for (const auto& line : host->lines()) {
    for (const auto& event : line.events()) {
      const std::optional<std::string> kernel = reader.StrStat(event, "kernel_name");
      if (!kernel.has_value()) continue;
      out.push_back(absl::StrCat(line.id(), " ", reader.EventName(event), " ",
                                 xspace::EventStartNs(start, line, event), " ", event.duration_ps(),
                                 " ", *kernel, " ",
                                 reader.IntStat(event, "nccl_launch_seq").value_or(-1)));
    }
  }
  return out;
}

// --flight-recorder-launches=false: the recorder keeps steps only and never asks a process for
// its launches, so the process's CUPTI subscription stays free for a framework profiler. The
// first frame a process gets is then a capture's Enable, not Recorder.
TEST_F(CuptiCollectorTest, RecorderWithoutLaunchesNeverAsksAProcessForThem) {
  CuptiCollectorOptions options;
  options.nvidia_gpus_dir = dir_.path() + "/no-nvidia-driver";
  options.recorder_launches = false;
  auto collector = std::make_unique<CuptiCollector>(server_.get(), options, &clock_);
  auto early = Connect(10, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, w), IsOk());
  auto late = Connect(20, 1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  ASSERT_THAT(collector->Prepare({"sess", w + kSec, 5 * kSec}), IsOk());
  EXPECT_EQ(inject::GetText(early->ExpectEnable().session_id), "sess");
  EXPECT_EQ(inject::GetText(late->ExpectEnable().session_id), "sess");
  collector->Abort();
}

TEST_F(CuptiCollectorTest, RecorderKeepsNcclLaunchesOnTheirThreadsLineOnTheAgentsClock) {
  constexpr int64_t kSkew = -11'000'000;  // agent wall = CLOCK_REALTIME - 11 ms
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector(kSkew);
  const int64_t r = 1'700'000'000 * kSec;  // the processes' CLOCK_REALTIME
  auto early = Connect(10, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, r + kSkew),
              IsOk());
  // The recorder asks every process for its launches, those registering later too.
  EXPECT_EQ(early->ExpectRecorder(), inject::kRecorderFlagCollectiveLaunches);
  auto late = Connect(20, 1);
  EXPECT_EQ(late->ExpectRecorder(), inject::kRecorderFlagCollectiveLaunches);
  const std::string all_reduce = "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K";
  const std::string reduce_scatter = "ncclKernel_ReduceScatter_RING_LL_Sum_float";
  early->SendSteps({{r + 100 * kMs, r + 200 * kMs, 5}});
  // The main thread launches an all-reduce in its step; another thread a reduce-scatter.
  early->SendLaunches({{r + 120 * kMs, 0, /*tid=*/10, 0}, {r + 150 * kMs, 1, /*tid=*/13, 1}},
                      {all_reduce, reduce_scatter});
  late->SendLaunches({{r + 160 * kMs, 7, /*tid=*/21, 0}, {r + 900 * kMs, 8, /*tid=*/21, 0}},
                     {"ncclDevKernel_SendRecv"}, /*dropped=*/3);
  ASSERT_TRUE(server_->WaitForLaunchesForTesting(4, absl::Seconds(10)));
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(1, absl::Seconds(10)));
  collector->RecordUntil(r + 300 * kMs + kSkew);
  collector->RecordUntil(r + 300 * kMs + kSkew);      // nothing twice
  EXPECT_EQ(collector->recorder_stats().records, 4);  // a step and three launches so far

  XSpace space;
  ASSERT_THAT(collector->Snapshot(r + kSkew, r + 400 * kMs + kSkew, &space), IsOk());
  const int64_t a0 = r + kSkew;
  EXPECT_EQ(SnapshotLaunches(space),
            (std::vector<std::string>{
                absl::StrCat("10 ncclAllReduce ", a0 + 120 * kMs, " 0 ", all_reduce, " 0"),
                absl::StrCat("13 ncclReduceScatter ", a0 + 150 * kMs, " 0 ", reduce_scatter, " 1"),
                absl::StrCat("21 ncclSendRecv ", a0 + 160 * kMs, " 0 ncclDevKernel_SendRecv 7")}))
      << space.DebugString();
  // The step is still the main thread's step root, holding its launch.
  const std::vector<std::string> all = SnapshotSteps(space);
  EXPECT_NE(std::find(all.begin(), all.end(),
                      absl::StrCat("10 step 5 ", a0 + 100 * kMs, " ", a0 + 200 * kMs)),
            all.end());
  // Each launch's line is named for its process and thread.
  const XPlane* host = FindPlane(space, "/host:CPU");
  ASSERT_NE(host, nullptr);
  std::vector<std::string> lines;
  for (const auto& line : host->lines()) lines.push_back(line.name());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "pid 10 tid 13"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "pid 20 tid 21"), lines.end());
  EXPECT_THAT(xspace::Validate(space), IsOk());
  EXPECT_TRUE(space.errors().empty()) << space.DebugString();
  EXPECT_TRUE(HasEntry(space.warnings(), "the CUDA processes lost 3 NCCL launches"));
  // A later snapshot holds the later launch; one before the launches holds none.
  XSpace later;
  ASSERT_THAT(collector->Snapshot(a0 + 800 * kMs, a0 + 1'000 * kMs, &later), IsOk());
  EXPECT_EQ(SnapshotLaunches(later),
            (std::vector<std::string>{
                absl::StrCat("21 ncclSendRecv ", a0 + 900 * kMs, " 0 ncclDevKernel_SendRecv 8")}));
  XSpace before;
  ASSERT_THAT(collector->Snapshot(a0 + 10 * kMs, a0 + 110 * kMs, &before), IsOk());
  EXPECT_TRUE(SnapshotLaunches(before).empty());
}

TEST(NcclLaunchEventNameTest, NamesEachNcclOp) {
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), "ncclAllReduce");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_AllGather_RING_LL"), "ncclAllGather");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
            "ncclReduceScatter");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_Broadcast_RING_LL"), "ncclBroadcast");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_Reduce_Sum_f32_RING_LL"), "ncclReduce");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_SendRecv"), "ncclSendRecv");
  EXPECT_EQ(NcclLaunchEventName("ncclKernel_Send_RING_SIMPLE_Sum_int8_t"), "ncclSend");
  EXPECT_EQ(NcclLaunchEventName("ncclKernel_Recv_RING_SIMPLE_Sum_int8_t"), "ncclRecv");
  EXPECT_EQ(NcclLaunchEventName("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K"),
            "ncclAllReduce");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_Generic_1"), "ncclGeneric");
  EXPECT_EQ(NcclLaunchEventName("ncclDevKernel_"), "ncclKernel");
}

TEST_F(CuptiCollectorTest, RecorderRingWrapsAtItsCapWithWholeStepsOnly) {
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector();
  const int64_t r = 1'700'000'000 * kSec;
  // Room for 5 steps of one process (measured from one step's cost).
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 3600 * kSec, .max_bytes = 1 << 20}, r), IsOk());
  auto a = Connect(7, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  a->SendSteps({{r, r + 10 * kMs, 0}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(1, absl::Seconds(10)));
  collector->RecordUntil(r + 10 * kMs);
  const int64_t per_step = collector->recorder_stats().bytes;
  ASSERT_GT(per_step, 0);

  auto capped = MakeCollector();
  const int64_t cap = 5 * per_step + per_step / 2;
  ASSERT_THAT(capped->StartRecorder({.keep_ns = 3600 * kSec, .max_bytes = cap}, r), IsOk());
  std::vector<inject::StepSampleEntry> more;
  for (int64_t k = 1; k < 20; ++k) more.push_back({r + k * 10 * kMs, r + (k + 1) * 10 * kMs, k});
  a->SendSteps(more);
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(20, absl::Seconds(10)));
  for (int64_t k = 1; k <= 20; ++k) {  // a tick every step: the cap holds after each
    capped->RecordUntil(r + k * 10 * kMs);
    const RecorderStats stats = capped->recorder_stats();
    EXPECT_LE(stats.bytes, cap) << k;
    EXPECT_EQ(stats.bytes % per_step, 0) << k;  // whole steps only
  }
  const RecorderStats stats = capped->recorder_stats();
  EXPECT_EQ(stats.records, 5);
  EXPECT_EQ(stats.evicted, 15);
  EXPECT_EQ(stats.since_ns, r + 15 * 10 * kMs);
  XSpace space;
  ASSERT_THAT(capped->Snapshot(r, r + 200 * kMs, &space), IsOk());
  std::vector<std::string> want;
  for (int64_t k = 15; k < 20; ++k) {
    want.push_back(absl::StrCat("7 step ", k, " ", r + k * 10 * kMs, " ", r + (k + 1) * 10 * kMs));
  }
  EXPECT_EQ(SnapshotSteps(space), want) << space.DebugString();
  EXPECT_TRUE(HasEntry(space.warnings(), "holds the last 50 ms only, of 200 ms asked"))
      << space.DebugString();
}

TEST_F(CuptiCollectorTest, SnapshotRacingACaptureOfTheSameProcess) {
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector();
  auto a = Connect(1, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_THAT(collector->StartRecorder({.keep_ns = 60 * kSec, .max_bytes = 1 << 20}, w), IsOk());
  EXPECT_EQ(a->ExpectRecorder(), inject::kRecorderFlagCollectiveLaunches);
  a->SendSteps({{w + 10 * kMs, w + 20 * kMs, 1}, {w + 20 * kMs, w + 30 * kMs, 2}});
  a->SendLaunches({{w + 25 * kMs, 0, 1, 0}}, {"ncclDevKernel_AllReduce_Sum_f32_RING_LL"});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(2, absl::Seconds(10)));
  ASSERT_TRUE(server_->WaitForLaunchesForTesting(1, absl::Seconds(10)));
  // A capture of the same process runs while snapshots are taken from another thread.
  ASSERT_THAT(collector->Prepare({"s", 0, kSec}), IsOk());
  const uint64_t token = a->ExpectEnable().token;
  a->SendStatus(token, StatusCode::kEnabled);
  ASSERT_THAT(collector->Start(w), IsOk());
  std::vector<XSpace> snapshots(50);
  std::vector<absl::Status> results(snapshots.size());
  std::thread snapshotter([&] {
    for (size_t i = 0; i < snapshots.size(); ++i) {
      results[i] = collector->Snapshot(w, w + 40 * kMs, &snapshots[i]);
      collector->RecordUntil(w + 40 * kMs + static_cast<int64_t>(i));
    }
  });
  ASSERT_THAT(collector->Stop(w + kSec), IsOk());
  a->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1, w + 100 * kMs, w + 200 * kMs)});
  XSpace captured;
  ASSERT_THAT(collector->Collect(&captured), IsOk());
  snapshotter.join();
  // The capture has its device activity; every snapshot has the two steps, nothing of the window.
  EXPECT_NE(FindPlane(captured, "/device:GPU:0"), nullptr) << captured.DebugString();
  for (size_t i = 0; i < snapshots.size(); ++i) {
    ASSERT_THAT(results[i], IsOk()) << i;
    EXPECT_EQ(FindPlane(snapshots[i], "/device:GPU:0"), nullptr) << i;
    EXPECT_EQ(SnapshotSteps(snapshots[i]),
              (std::vector<std::string>{
                  absl::StrCat("1 step 1 ", w + 10 * kMs, " ", w + 20 * kMs),
                  absl::StrCat("1 step 2 ", w + 20 * kMs, " ", w + 30 * kMs),
                  absl::StrCat("1 ncclAllReduce ", w + 25 * kMs, " ", w + 25 * kMs)}))
        << i;
  }
  EXPECT_EQ(collector->recorder_stats().records, 3);
}

TEST_F(CuptiCollectorTest, WhatTheWindowLacksIsTakenOnceWithItsAmounts) {
  // Within every cap and nothing dropped: nothing lacks.
  {
    auto collector = MakeCollector();
    TwoRanks ranks;
    ASSERT_NO_FATAL_FAILURE(RunTwoRankWindow(collector.get(), "0", "1", &ranks));
    const uint64_t t = static_cast<uint64_t>(ranks.window_start + 1000);
    ranks.a->AnswerDisableAndFlush(ranks.token, {FakeProcess::SmallBatch(1, t, t + 500)});
    ranks.b->AnswerDisableAndFlush(ranks.token, {FakeProcess::SmallBatch(2, t, t + 500)});
    XSpace space;
    ASSERT_THAT(collector->Collect(&space), IsOk());
    std::vector<profctl::v1::Shortfall> found;
    collector->TakeShortfalls(&found);
    EXPECT_TRUE(found.empty());
  }
  // A process over its byte cap loses its further batches (counted in bytes), and another
  // reports records CUPTI dropped.
  const std::vector<uint8_t> batch = FakeProcess::SmallBatch(1, 0, 500);
  server_.reset();
  InjectServerOptions options;
  options.socket_path = dir_.path() + "/capped.sock";
  options.max_connections_per_peer = 1000;
  options.max_client_window_bytes = 2 * static_cast<int64_t>(batch.size());
  absl::StatusOr<std::unique_ptr<InjectServer>> s = InjectServer::Start(options);
  ASSERT_THAT(s, IsOk());
  server_ = *std::move(s);
  auto collector = MakeCollector();
  TwoRanks ranks;
  ASSERT_NO_FATAL_FAILURE(RunTwoRankWindow(collector.get(), "0", "1", &ranks));
  const uint64_t t = static_cast<uint64_t>(ranks.window_start + 1000);
  std::vector<std::vector<uint8_t>> five;
  for (int i = 0; i < 5; ++i) five.push_back(FakeProcess::SmallBatch(1, t, t + 500));
  ranks.a->AnswerDisableAndFlush(ranks.token, five);
  ranks.b->AnswerDisableAndFlush(ranks.token, {FakeProcess::SmallBatch(2, t, t + 500)},
                                 /*dropped=*/7);
  XSpace space;
  ASSERT_THAT(collector->Collect(&space), IsOk());
  std::vector<profctl::v1::Shortfall> found;
  collector->TakeShortfalls(&found);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].kind(), profctl::v1::SHORTFALL_KIND_DROPPED_RECORD_BATCHES);
  EXPECT_EQ(found[0].amount(), 3 * five[0].size());
  EXPECT_THAT(found[0].detail(), ::testing::HasSubstr("from 1 process(es) dropped over the "
                                                      "window's byte caps"));
  EXPECT_EQ(found[1].kind(), profctl::v1::SHORTFALL_KIND_DROPPED_RECORDS);
  EXPECT_EQ(found[1].amount(), 7u);
  // Taken once.
  found.clear();
  collector->TakeShortfalls(&found);
  EXPECT_TRUE(found.empty());
}

}  // namespace
}  // namespace profctl::agent::cupti
