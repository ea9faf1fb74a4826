// The host's NVIDIA GPUs as nvidia-smi numbers them, read from the driver's /proc interface:
// one directory per GPU, named by its PCI bus id, under /proc/driver/nvidia/gpus, each with an
// `information` file of "Key: <tabs> value" lines, among them
//   GPU UUID: 	 GPU-5f1c1234-89ab-cdef-0123-456789abcdef
// nvidia-smi (and CUDA_VISIBLE_DEVICES given as integers, with CUDA_DEVICE_ORDER=PCI_BUS_ID)
// number GPUs in PCI bus id order, so a GPU's index is its position in that order.
//
// The cupti collector uses the table to put each process's CUDA ordinals on the host's
// /device:GPU:<index> planes by the UUIDs the injection library reports (cupti_collector.h).
// Thread-safety: a HostGpuTable is immutable after construction.
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_HOST_GPUS_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_HOST_GPUS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl::agent::cupti {

inline constexpr char kNvidiaGpusProcDir[] = "/proc/driver/nvidia/gpus";

using GpuUuid = std::array<uint8_t, 16>;

// Parses a GPU UUID as nvidia-smi and CUDA print it, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
// (the "GPU-" prefix optional, hex digits in either case, dashes anywhere): exactly 32 hex
// digits. nullopt otherwise (e.g. "GPU-????????-..." before the driver knows it).
std::optional<GpuUuid> ParseGpuUuid(absl::string_view text);

// `prefix` ("GPU-" or "MIG-") and the UUID in the 8-4-4-4-12 form, lowercase.
std::string FormatGpuUuid(absl::string_view prefix, const GpuUuid& uuid);

struct HostGpu {
  int index = 0;           // nvidia-smi's index: the position in PCI bus id order
  std::string pci_bus_id;  // the directory name, e.g. "0000:3b:00.0"
  // From the `information` file; nullopt when it could not be read or has no usable UUID line
  // (the GPU still holds its index).
  std::optional<GpuUuid> uuid;
};

class HostGpuTable {
 public:
  HostGpuTable() = default;  // no GPUs known
  // `gpus` in any order; they are sorted by PCI bus id and numbered.
  explicit HostGpuTable(std::vector<HostGpu> gpus);

  const std::vector<HostGpu>& gpus() const { return gpus_; }
  bool empty() const { return gpus_.empty(); }

  // The index of the GPU with this UUID.
  std::optional<int> FindUuid(const GpuUuid& uuid) const;
  // The index of the one GPU whose UUID starts with the hex digits of `text` ("GPU-5f1c",
  // "GPU-5f1c1234-89ab", case-insensitive, dashes ignored; CUDA accepts such unique prefixes in
  // CUDA_VISIBLE_DEVICES). nullopt when `text` is not "GPU-" and at least one hex digit, or no GPU
  // or more than one matches.
  std::optional<int> FindUuidPrefix(absl::string_view text) const;

 private:
  std::vector<HostGpu> gpus_;
};

// Reads the table from `gpus_dir` (kNvidiaGpusProcDir; tests pass a fake tree). NOT_FOUND when the
// directory cannot be listed (no NVIDIA driver). Entries whose names are not PCI bus ids
// ("dddd:bb:dd.f", hex) are ignored; a GPU whose `information` cannot be read or has no usable
// "GPU UUID:" line is kept without a UUID. Extra lines and whitespace are tolerated.
absl::StatusOr<HostGpuTable> ReadHostGpus(const std::string& gpus_dir);

// The UUID in one `information` file's text: the value of its "GPU UUID" line.
std::optional<GpuUuid> ParseNvidiaGpuInformation(absl::string_view text);

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_HOST_GPUS_H_
