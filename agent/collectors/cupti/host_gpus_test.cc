#include "agent/collectors/cupti/host_gpus.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/file_util.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent::cupti {
namespace {

using profctl::testkit::TempDir;

constexpr char kUuidA[] = "GPU-5f1c1234-89ab-cdef-0123-456789abcdef";
constexpr char kUuidB[] = "GPU-5f1d0000-1111-2222-3333-444455556666";
constexpr char kUuidC[] = "GPU-a0b1c2d3-e4f5-0617-2839-4a5b6c7d8e9f";

// One GPU's directory under `gpus` with an `information` file as the driver writes it.
void WriteGpu(const std::string& gpus, const std::string& bus_id, const std::string& info) {
  ASSERT_THAT(MakeDirs(JoinPath(gpus, bus_id)), IsOk());
  ASSERT_THAT(WriteFileAtomically(JoinPath(JoinPath(gpus, bus_id), "information"), info), IsOk());
}

// What the driver shows before it knows the UUID.
std::string Unknown() {
  return "GPU-" + std::string(8, '?') + "-" + std::string(4, '?') + "-" + std::string(4, '?') +
         "-" + std::string(4, '?') + "-" + std::string(12, '?');
}

std::string Information(const std::string& uuid, const std::string& bus_id) {
  return "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 77\nGPU UUID: \t " + uuid +
         "\nVideo BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
         "DMA Mask: \t 0xfffffffffffff\nBus Location: \t " +
         bus_id + "\nDevice Minor: \t 0\nGPU Excluded:\t No\n";
}

TEST(GpuUuidTest, ParsesAndFormats) {
  const std::optional<GpuUuid> a = ParseGpuUuid(kUuidA);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ((*a)[0], 0x5f);
  EXPECT_EQ((*a)[15], 0xef);
  EXPECT_EQ(FormatGpuUuid("GPU-", *a), kUuidA);
  EXPECT_EQ(FormatGpuUuid("MIG-", *a), "MIG-5f1c1234-89ab-cdef-0123-456789abcdef");
  // Case, whitespace and a missing prefix are tolerated.
  EXPECT_EQ(ParseGpuUuid("  gpu-5F1C1234-89AB-CDEF-0123-456789ABCDEF \t"), a);
  EXPECT_EQ(ParseGpuUuid("5f1c123489abcdef0123456789abcdef"), a);
  const std::string unknown = Unknown();
  for (const char* bad : {"", "GPU-", "GPU-5f1c", unknown.c_str(),
                          "GPU-5f1c1234-89ab-cdef-0123-456789abcdef00", "MIG-5f1c"}) {
    EXPECT_FALSE(ParseGpuUuid(bad).has_value()) << bad;
  }
}

TEST(HostGpusTest, ParsesInformationWithOddWhitespace) {
  EXPECT_EQ(ParseNvidiaGpuInformation(Information(kUuidA, "0000:3b:00.0")), ParseGpuUuid(kUuidA));
  EXPECT_EQ(ParseNvidiaGpuInformation("GPU UUID:GPU-5f1c1234-89ab-cdef-0123-456789abcdef"),
            ParseGpuUuid(kUuidA));
  EXPECT_EQ(ParseNvidiaGpuInformation("  GPU UUID  :   \t\t" + std::string(kUuidA) + "  \r\n"),
            ParseGpuUuid(kUuidA));
  EXPECT_FALSE(ParseNvidiaGpuInformation("Model: \t\t X\nBus Location: \t 0000:01:00.0\n"));
  EXPECT_FALSE(ParseNvidiaGpuInformation("GPU UUID: \t " + Unknown()));
  EXPECT_FALSE(ParseNvidiaGpuInformation(""));
}

TEST(HostGpusTest, ReadsAFakeProcTreeInPciBusOrder) {
  TempDir dir;
  const std::string gpus = dir.path() + "/proc/driver/nvidia/gpus";
  // Written out of order; nvidia-smi numbers them by PCI bus id.
  WriteGpu(gpus, "0000:b1:00.0", Information(kUuidC, "0000:b1:00.0"));
  WriteGpu(gpus, "0000:3b:00.0", Information(kUuidA, "0000:3b:00.0"));
  WriteGpu(gpus, "0000:5e:00.0", "Model: \t\t NVIDIA H100\nIRQ: \t 12\n");  // no UUID line
  WriteGpu(gpus, "0000:86:00.0", Information(kUuidB, "0000:86:00.0"));
  ASSERT_THAT(MakeDirs(gpus + "/not-a-bus-id"), IsOk());
  absl::StatusOr<HostGpuTable> table = ReadHostGpus(gpus);
  ASSERT_THAT(table, IsOk());
  ASSERT_EQ(table->gpus().size(), 4u);
  EXPECT_EQ(table->gpus()[0].pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(table->gpus()[1].pci_bus_id, "0000:5e:00.0");
  EXPECT_FALSE(table->gpus()[1].uuid.has_value());  // keeps its index, matches nothing
  EXPECT_EQ(table->gpus()[2].pci_bus_id, "0000:86:00.0");
  EXPECT_EQ(table->gpus()[3].pci_bus_id, "0000:b1:00.0");
  EXPECT_EQ(table->FindUuid(*ParseGpuUuid(kUuidA)), 0);
  EXPECT_EQ(table->FindUuid(*ParseGpuUuid(kUuidB)), 2);
  EXPECT_EQ(table->FindUuid(*ParseGpuUuid(kUuidC)), 3);
  EXPECT_FALSE(table->FindUuid(GpuUuid{}).has_value());
  // CUDA_VISIBLE_DEVICES accepts unique UUID prefixes.
  EXPECT_EQ(table->FindUuidPrefix(kUuidA), 0);
  EXPECT_EQ(table->FindUuidPrefix("GPU-5f1c"), 0);
  EXPECT_EQ(table->FindUuidPrefix("gpu-A0B1"), 3);
  EXPECT_FALSE(table->FindUuidPrefix("GPU-5f1").has_value());  // A and B: ambiguous
  EXPECT_FALSE(table->FindUuidPrefix("GPU-ffff").has_value());
  EXPECT_FALSE(table->FindUuidPrefix("GPU-").has_value());
  EXPECT_FALSE(table->FindUuidPrefix("5f1c").has_value());
  EXPECT_FALSE(table->FindUuidPrefix("GPU-zz").has_value());
}

TEST(HostGpusTest, UnreadableInformationKeepsTheIndex) {
  TempDir dir;
  const std::string gpus = dir.path() + "/gpus";
  WriteGpu(gpus, "0000:01:00.0", Information(kUuidA, "0000:01:00.0"));
  // A GPU directory without an information file, and one we may not read.
  ASSERT_THAT(MakeDirs(gpus + "/0000:02:00.0"), IsOk());
  WriteGpu(gpus, "0000:03:00.0", Information(kUuidB, "0000:03:00.0"));
  ASSERT_EQ(chmod((gpus + "/0000:03:00.0").c_str(), 0), 0);
  absl::StatusOr<HostGpuTable> table = ReadHostGpus(gpus);
  ASSERT_EQ(chmod((gpus + "/0000:03:00.0").c_str(), 0755), 0);
  ASSERT_THAT(table, IsOk());
  ASSERT_EQ(table->gpus().size(), 3u);
  EXPECT_EQ(table->FindUuid(*ParseGpuUuid(kUuidA)), 0);
  EXPECT_FALSE(table->gpus()[1].uuid.has_value());
  if (geteuid() != 0) {  // root reads it anyway
    EXPECT_FALSE(table->gpus()[2].uuid.has_value());
  }
  EXPECT_EQ(table->gpus()[2].index, 2);
}

TEST(HostGpusTest, NoDriverIsNotFound) {
  TempDir dir;
  absl::StatusOr<HostGpuTable> table = ReadHostGpus(dir.path() + "/proc/driver/nvidia/gpus");
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  // An empty directory (driver loaded, no GPU bound) is an empty table.
  absl::StatusOr<HostGpuTable> empty = ReadHostGpus(dir.path());
  ASSERT_THAT(empty, IsOk());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace profctl::agent::cupti
