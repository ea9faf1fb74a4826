#include "analysis/op_classify.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "re2/re2.h"

namespace profctl::analysis {
namespace {

std::string Lower(absl::string_view s) { return absl::AsciiStrToLower(s); }

// `s` lower-cased without blanks and '_' (for memcpy names: "Memcpy HtoD" == "memcpy_htod").
std::string Squeeze(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c != ' ' && c != '_') out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool StartsWithAny(absl::string_view s, absl::Span<const absl::string_view> prefixes) {
  for (const absl::string_view p : prefixes) {
    if (absl::StartsWith(s, p)) return true;
  }
  return false;
}

bool ContainsAny(absl::string_view s, absl::Span<const absl::string_view> parts) {
  for (const absl::string_view p : parts) {
    if (absl::StrContains(s, p)) return true;
  }
  return false;
}

// The GPU API call with its API prefix removed ("cudaLaunchKernel" -> "LaunchKernel",
// "cuMemcpyAsync" -> "MemcpyAsync", "hipMemcpy" -> "Memcpy"), or empty when `name` is not one.
absl::string_view StripGpuApiPrefix(absl::string_view name) {
  for (const absl::string_view p : {"cuda", "hip"}) {
    if (name.size() > p.size() && absl::StartsWith(name, p) &&
        absl::ascii_isupper(static_cast<unsigned char>(name[p.size()]))) {
      return name.substr(p.size());
    }
  }
  if (name.size() > 2 && absl::StartsWith(name, "cu") &&
      absl::ascii_isupper(static_cast<unsigned char>(name[2]))) {
    return name.substr(2);
  }
  return {};
}

enum class MemKind { kUnknown, kHost, kDevice };

MemKind MemKindOf(absl::string_view k) {
  const std::string lower = Lower(k);
  if (lower == "pageable" || lower == "pinned" || lower == "host") return MemKind::kHost;
  if (lower == "device" || lower == "array" || lower == "device_static") return MemKind::kDevice;
  return MemKind::kUnknown;
}

// "HtoD" / "H2D" / ... (already squeezed) -> kind.
std::optional<OpKind> DirectionKind(absl::string_view squeezed) {
  if (StartsWithAny(squeezed, {"htod", "h2d"})) return OpKind::kMemcpyH2D;
  if (StartsWithAny(squeezed, {"dtoh", "d2h"})) return OpKind::kMemcpyD2H;
  if (StartsWithAny(squeezed, {"dtod", "d2d", "ptop", "p2p", "peer"})) return OpKind::kMemcpyD2D;
  if (StartsWithAny(squeezed, {"htoh", "h2h"})) return OpKind::kDeviceCompute;
  return std::nullopt;
}

}  // namespace

absl::Status ValidateReaderOptions(const ReaderOptions& options) {
  return StepMatcher::Create(options.step_pattern).status();
}

StepMatcher::StepMatcher(std::unique_ptr<re2::RE2> re) : re_(std::move(re)) {}
StepMatcher::StepMatcher(StepMatcher&&) noexcept = default;
StepMatcher& StepMatcher::operator=(StepMatcher&&) noexcept = default;
StepMatcher::~StepMatcher() = default;

absl::StatusOr<StepMatcher> StepMatcher::Create(absl::string_view pattern) {
  RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), opts);
  if (!re->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("step pattern '", pattern, "' is not a valid RE2 regex: ", re->error()));
  }
  if (re->NumberOfCapturingGroups() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step pattern '", pattern, "' has no capture group: group 1 must capture the step number"));
  }
  return StepMatcher(std::move(re));
}

std::optional<int64_t> StepMatcher::Match(absl::string_view name, bool* bad_number) const {
  if (name.size() > kMaxStepNameLength) return std::nullopt;
  re2::StringPiece group;
  if (!RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_, &group)) {
    return std::nullopt;
  }
  int64_t step = 0;
  if (!absl::SimpleAtoi(absl::string_view(group.data(), group.size()), &step) || step < 0) {
    if (bad_number != nullptr) *bad_number = true;
    return std::nullopt;
  }
  return step;
}

OpKind ClassifyHostOpName(absl::string_view name) {
  const std::string lower = Lower(name);
  // Input waits.
  if (StartsWithAny(lower,
                    {"getnextbatch", "iteratorgetnext", "iterator::", "enumerate(dataloader)",
                     "multideviceiteratorgetnext", "infeedenqueue"}) ||
      ContainsAny(lower,
                  {"iteratorgetnext", "dataloader", "data_loader", "_next_data", "next_batch"}) ||
      lower == "next" || lower == "__next__") {
    return OpKind::kHostInputWait;
  }
  // Collective library calls enqueue device work.
  if (StartsWithAny(lower, {"nccl", "rccl"})) return OpKind::kHostLaunch;
  if (ContainsAny(lower, {"blockhostuntilready", "blockhostuntildone"})) return OpKind::kHostSync;
  const absl::string_view api = StripGpuApiPrefix(name);
  if (!api.empty()) {
    if (StartsWithAny(api, {"StreamSynchronize", "DeviceSynchronize", "EventSynchronize",
                            "CtxSynchronize"})) {
      return OpKind::kHostSync;
    }
    if (StartsWithAny(api, {"Launch", "GraphLaunch", "ExtLaunch", "ModuleLaunch", "EventRecord",
                            "StreamWaitEvent", "Memset"})) {
      return OpKind::kHostLaunch;
    }
    if (absl::StartsWith(api, "Memcpy")) {
      return absl::StrContains(api, "Async") ? OpKind::kHostLaunch : OpKind::kHostSync;
    }
  }
  return OpKind::kHostOther;
}

bool IsCollectiveDeviceOpName(absl::string_view name) {
  if (absl::StartsWithIgnoreCase(name, "nccl") || absl::StartsWithIgnoreCase(name, "rccl")) {
    return true;
  }
  if (IsCollectiveOpName(name)) return true;
  const std::string squeezed = Squeeze(name);
  // Squeeze keeps '-': drop it too for "collective-permute".
  std::string bare;
  bare.reserve(squeezed.size());
  for (const char c : squeezed) {
    if (c != '-') bare.push_back(c);
  }
  return absl::StrContains(bare, "collectivepermute") && !absl::StrContains(bare, "start");
}

OpKind ClassifyDeviceOpName(absl::string_view name) {
  if (IsCollectiveDeviceOpName(name)) return OpKind::kCollective;
  const std::string squeezed = Squeeze(name);
  if (absl::StartsWith(squeezed, "memcpy")) {
    return DirectionKind(absl::string_view(squeezed).substr(6)).value_or(OpKind::kDeviceCompute);
  }
  if (absl::StartsWith(squeezed, "p2p")) return OpKind::kMemcpyD2D;
  if (absl::StartsWith(squeezed, "infeed")) return OpKind::kMemcpyH2D;
  if (absl::StartsWith(squeezed, "outfeed")) return OpKind::kMemcpyD2H;
  return OpKind::kDeviceCompute;
}

std::optional<OpKind> MemcpyKindFromDetails(absl::string_view details) {
  MemKind src = MemKind::kUnknown;
  MemKind dst = MemKind::kUnknown;
  for (const absl::string_view token : absl::StrSplit(details, ' ', absl::SkipEmpty())) {
    const size_t colon = token.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = token.substr(0, colon);
    const absl::string_view value = token.substr(colon + 1);
    if (key == "kind_src") {
      src = MemKindOf(value);
    } else if (key == "kind_dst") {
      dst = MemKindOf(value);
    } else if (key == "kind") {
      if (std::optional<OpKind> k = DirectionKind(Squeeze(value))) return k;
    }
  }
  if (src == MemKind::kUnknown || dst == MemKind::kUnknown) return std::nullopt;
  if (src == MemKind::kHost) {
    return dst == MemKind::kDevice ? OpKind::kMemcpyH2D : OpKind::kDeviceCompute;
  }
  return dst == MemKind::kDevice ? OpKind::kMemcpyD2D : OpKind::kMemcpyD2H;
}

void ReaderWarnings::Note(absl::string_view what, absl::FunctionRef<std::string()> where) {
  for (Entry& e : entries_) {
    if (e.what == what) {
      ++e.count;
      return;
    }
  }
  entries_.push_back(Entry{std::string(what), where(), 1});
}

void ReaderWarnings::Add(std::string warning) { plain_.push_back(std::move(warning)); }

std::vector<std::string> ReaderWarnings::Finish() && {
  std::vector<std::string> out = std::move(plain_);
  for (const Entry& e : entries_) {
    out.push_back(absl::StrCat(e.what, ": ", e.count, " (first: ", e.first, ")"));
  }
  return out;
}

}  // namespace profctl::analysis
