#include "agent/collectors/cupti/host_gpus.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace profctl::agent::cupti {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The hex digits of `text` (dashes dropped), lowercase; nullopt on any other character.
std::optional<std::string> HexDigits(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '-') continue;
    if (HexValue(c) < 0) return std::nullopt;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

absl::string_view StripGpuPrefix(absl::string_view text) {
  if (text.size() >= 4 && absl::EqualsIgnoreCase(text.substr(0, 4), "GPU-")) text.remove_prefix(4);
  return text;
}

// (domain, bus, device, function) of "dddd:bb:dd.f" (hex), nullopt for other names.
using PciKey = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;
std::optional<PciKey> ParsePciBusId(absl::string_view name) {
  const std::vector<absl::string_view> parts = absl::StrSplit(name, absl::ByAnyChar(":."));
  if (parts.size() != 4) return std::nullopt;
  uint32_t v[4] = {};
  for (int i = 0; i < 4; ++i) {
    if (parts[i].empty() || parts[i].size() > 8) return std::nullopt;
    for (const char c : parts[i]) {
      if (HexValue(c) < 0) return std::nullopt;
    }
    if (!absl::SimpleHexAtoi(parts[i], &v[i])) return std::nullopt;
  }
  return PciKey{v[0], v[1], v[2], v[3]};
}

}  // namespace

std::optional<GpuUuid> ParseGpuUuid(absl::string_view text) {
  std::optional<std::string> hex = HexDigits(StripGpuPrefix(absl::StripAsciiWhitespace(text)));
  if (!hex || hex->size() != 32) return std::nullopt;
  GpuUuid out{};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(HexValue((*hex)[2 * i]) << 4 | HexValue((*hex)[2 * i + 1]));
  }
  return out;
}

std::string FormatGpuUuid(absl::string_view prefix, const GpuUuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[uuid[i] >> 4]);
    out.push_back(kHex[uuid[i] & 0xF]);
  }
  return out;
}

HostGpuTable::HostGpuTable(std::vector<HostGpu> gpus) : gpus_(std::move(gpus)) {
  std::stable_sort(gpus_.begin(), gpus_.end(), [](const HostGpu& a, const HostGpu& b) {
    const std::optional<PciKey> ka = ParsePciBusId(a.pci_bus_id);
    const std::optional<PciKey> kb = ParsePciBusId(b.pci_bus_id);
    if (ka && kb) return *ka < *kb;
    if (ka.has_value() != kb.has_value()) return ka.has_value();
    return a.pci_bus_id < b.pci_bus_id;
  });
  for (size_t i = 0; i < gpus_.size(); ++i) gpus_[i].index = static_cast<int>(i);
}

std::optional<int> HostGpuTable::FindUuid(const GpuUuid& uuid) const {
  for (const HostGpu& g : gpus_) {
    if (g.uuid == uuid) return g.index;
  }
  return std::nullopt;
}

std::optional<int> HostGpuTable::FindUuidPrefix(absl::string_view text) const {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() < 4 || !absl::EqualsIgnoreCase(text.substr(0, 4), "GPU-")) return std::nullopt;
  const std::optional<std::string> prefix = HexDigits(text.substr(4));
  if (!prefix || prefix->empty() || prefix->size() > 32) return std::nullopt;
  std::optional<int> found;
  for (const HostGpu& g : gpus_) {
    if (!g.uuid) continue;
    const std::string hex = FormatGpuUuid("", *g.uuid);
    if (!absl::StartsWith(*HexDigits(hex), *prefix)) continue;
    if (found) return std::nullopt;  // ambiguous
    found = g.index;
  }
  return found;
}

std::optional<GpuUuid> ParseNvidiaGpuInformation(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, colon)) != "GPU UUID") continue;
    return ParseGpuUuid(line.substr(colon + 1));
  }
  return std::nullopt;
}

absl::StatusOr<HostGpuTable> ReadHostGpus(const std::string& gpus_dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(gpus_dir, ec);
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot list NVIDIA GPUs in ", gpus_dir, ": ", ec.message()));
  }
  std::vector<HostGpu> gpus;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!ParsePciBusId(name)) continue;
    HostGpu gpu;
    gpu.pci_bus_id = name;
    if (absl::StatusOr<std::string> info = ReadFile(JoinPath(it->path().string(), "information"));
        info.ok()) {
      gpu.uuid = ParseNvidiaGpuInformation(*info);
    }
    gpus.push_back(std::move(gpu));
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot list NVIDIA GPUs in ", gpus_dir, ": ", ec.message()));
  }
  return HostGpuTable(std::move(gpus));
}

}  // namespace profctl::agent::cupti
