#include "analysis/tools/tool_readers.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analysis/readers/kineto_reader.h"
#include "common/gzip.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "xspace/xspace.h"

namespace profctl::analysis {

namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

bool IsCompileName(absl::string_view name) { return ContainsIgnoreCase(name, "compil"); }

bool IsRuntimeName(absl::string_view name, OpKind kind) {
  if (kind == OpKind::kHostLaunch || kind == OpKind::kHostSync) return true;
  const auto upper_at = [&](size_t i) {
    return name.size() > i && absl::ascii_isupper(static_cast<unsigned char>(name[i]));
  };
  return (absl::StartsWith(name, "cuda") && upper_at(4)) ||
         (absl::StartsWith(name, "cu") && upper_at(2)) ||
         (absl::StartsWith(name, "hip") && upper_at(3)) ||
         absl::StartsWithIgnoreCase(name, "nccl") || absl::StartsWithIgnoreCase(name, "rccl");
}

// TensorFlow's op full name `scope/Name:Type` (tf_op_utils' ParseTfOpFullname): the type, or
// empty when `name` is not one (`Iterator::...` and other `::` names are not ops).
absl::string_view TfOpType(absl::string_view name) {
  if (absl::StrContains(name, "::") || absl::StrContains(name, ' ')) return {};
  const size_t colon = name.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == name.size()) return {};
  const absl::string_view type = name.substr(colon + 1);
  for (const char c : type) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return {};
  }
  return type;
}

// An HLO instruction's opcode from its name: "fusion.12" -> "fusion", "%dot.3" -> "dot".
absl::string_view HloType(absl::string_view name) {
  absl::ConsumePrefix(&name, "%");
  const size_t dot = name.rfind('.');
  if (dot != absl::string_view::npos && dot > 0) {
    const absl::string_view suffix = name.substr(dot + 1);
    if (!suffix.empty() && std::all_of(suffix.begin(), suffix.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        })) {
      return name.substr(0, dot);
    }
  }
  return name;
}

// `regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z occ_pct:P` (TSL_WIRE.md).
KernelDetails ParseKernelDetails(absl::string_view text) {
  KernelDetails d;
  const auto dims = [](absl::string_view v, std::array<int32_t, 3>* out) {
    int i = 0;
    for (absl::string_view part : absl::StrSplit(v, ',')) {
      if (i == 3) break;
      int32_t x = 0;
      if (absl::SimpleAtoi(part, &x)) (*out)[static_cast<size_t>(i)] = x;
      ++i;
    }
  };
  for (absl::string_view token : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t colon = token.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = token.substr(0, colon);
    const absl::string_view value = token.substr(colon + 1);
    if (key == "regs") {
      (void)absl::SimpleAtoi(value, &d.registers_per_thread);
    } else if (key == "static_shared") {
      (void)absl::SimpleAtoi(value, &d.static_shared_bytes);
    } else if (key == "dynamic_shared") {
      (void)absl::SimpleAtoi(value, &d.dynamic_shared_bytes);
    } else if (key == "grid") {
      dims(value, &d.grid);
    } else if (key == "block") {
      dims(value, &d.block);
    } else if (key == "occ_pct") {
      (void)absl::SimpleAtod(value, &d.occupancy_pct);
    }
  }
  return d;
}

// --- XSpace ------------------------------------------------------------------------------------

// The stats of one plane, by name.
class PlaneStats {
 public:
  explicit PlaneStats(const XPlane& plane) : plane_(plane) {
    for (const auto& [id, md] : plane.stat_metadata()) {
      names_[id] = md.name();
      ids_.emplace(md.name(), id);
    }
  }

  int64_t Id(absl::string_view name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? -1 : it->second;
  }
  absl::string_view Name(int64_t id) const {
    auto it = names_.find(id);
    return it == names_.end() ? absl::string_view() : absl::string_view(it->second);
  }
  // The stat with metadata id `id` on the event, else on its metadata.
  static const XStat* Find(const XEvent& e, const XEventMetadata* md, int64_t id) {
    if (id < 0) return nullptr;
    for (const XStat& s : e.stats()) {
      if (s.metadata_id() == id) return &s;
    }
    if (md != nullptr) {
      for (const XStat& s : md->stats()) {
        if (s.metadata_id() == id) return &s;
      }
    }
    return nullptr;
  }
  std::optional<int64_t> Int(const XStat* s) const {
    if (s == nullptr) return std::nullopt;
    if (s->value_case() == XStat::kInt64Value) return s->int64_value();
    if (s->value_case() == XStat::kUint64Value &&
        s->uint64_value() <= static_cast<uint64_t>(kInt64Max)) {
      return static_cast<int64_t>(s->uint64_value());
    }
    return std::nullopt;
  }
  std::optional<double> Double(const XStat* s) const {
    if (s == nullptr) return std::nullopt;
    if (s->value_case() == XStat::kDoubleValue) return s->double_value();
    if (std::optional<int64_t> i = Int(s)) return static_cast<double>(*i);
    return std::nullopt;
  }
  absl::string_view Str(const XStat* s) const {
    if (s == nullptr) return {};
    if (s->value_case() == XStat::kStrValue) return s->str_value();
    if (s->value_case() == XStat::kRefValue) return Name(static_cast<int64_t>(s->ref_value()));
    return {};
  }
  // A plane-level stat.
  const XStat* PlaneStat(absl::string_view name) const {
    const int64_t id = Id(name);
    for (const XStat& s : plane_.stats()) {
      if (s.metadata_id() == id) return &s;
    }
    return nullptr;
  }

 private:
  const XPlane& plane_;
  absl::flat_hash_map<int64_t, std::string> names_;
  absl::flat_hash_map<std::string, int64_t> ids_;
};

class XSpaceToolReader {
 public:
  XSpaceToolReader(const XSpace& space, int64_t offset_ns, const StepMatcher& matcher,
                   ToolTrace* out)
      : space_(space), offset_ns_(offset_ns), matcher_(matcher), out_(out) {
    profile_start_ = xspace::ProfileStartNs(space);
  }

  void Read() {
    bool tf = false;
    bool xla = false;
    bool profctl = false;
    for (const XPlane& plane : space_.planes()) {
      ReadVersions(plane);
      if (plane.name() == xspace::kHostPlaneName) {
        ReadHost(plane, &tf, &profctl);
        continue;
      }
      for (const absl::string_view prefix :
           {xspace::kGpuPlanePrefix, xspace::kTpuPlanePrefix, xspace::kCustomPlanePrefix}) {
        if (absl::StartsWith(plane.name(), prefix)) {
          ReadDevice(plane, prefix, &tf, &xla);
          break;
        }
      }
    }
    RunEnvironment& env = out_->environment;
    env.framework = tf ? "TensorFlow" : xla ? "JAX" : profctl ? "profctl" : "";
    for (const std::string& h : space_.hostnames()) env.hostnames.push_back(h);
    std::sort(env.devices.begin(), env.devices.end(),
              [](const DeviceInfo& a, const DeviceInfo& b) { return a.id < b.id; });
    // The window, as ReadXSpaceHost.
    const std::optional<int64_t> stop = xspace::ProfileStopNs(space_);
    if (profile_start_ > 0) {
      out_->window_start_ns = profile_start_ - offset_ns_;
      out_->window_end_ns = stop && *stop >= profile_start_
                                ? *stop - offset_ns_
                                : std::max(out_->window_start_ns, max_end_);
    } else if (min_start_ <= max_end_) {
      out_->window_start_ns = min_start_;
      out_->window_end_ns = max_end_;
    }
    out_->warnings = std::move(warnings_).Finish();
  }

 private:
  bool Times(const XPlane& plane, const XLine& line, const XEvent& e, int64_t* start,
             int64_t* end) {
    if (e.duration_ps() < 0) {
      warnings_.Note("events with negative duration dropped",
                     [&] { return absl::StrCat("plane ", plane.name(), " line ", line.id()); });
      return false;
    }
    const int64_t s = xspace::EventStartNs(profile_start_, line, e);
    const int64_t t = xspace::EventEndNs(profile_start_, line, e);
    if (s < -kMaxAbsTimeNs || t > kMaxAbsTimeNs || s > t) {
      warnings_.Note("events with times out of range dropped",
                     [&] { return absl::StrCat("plane ", plane.name(), " line ", line.id()); });
      return false;
    }
    *start = s - offset_ns_;
    *end = t - offset_ns_;
    min_start_ = std::min(min_start_, *start);
    max_end_ = std::max(max_end_, *end);
    return true;
  }

  const XEventMetadata* Meta(const XPlane& plane, const XEvent& e) {
    auto it = plane.event_metadata().find(e.metadata_id());
    if (it == plane.event_metadata().end()) {
      warnings_.Note("events with an undefined metadata id dropped", [&] {
        return absl::StrCat("plane ", plane.name(), " metadata_id ", e.metadata_id());
      });
      return nullptr;
    }
    return &it->second;
  }

  void ReadVersions(const XPlane& plane) {
    PlaneStats stats(plane);
    for (const XStat& s : plane.stats()) {
      const absl::string_view name = stats.Name(s.metadata_id());
      std::string value(stats.Str(&s));
      if (value.empty()) {
        if (std::optional<int64_t> i = stats.Int(&s)) value = absl::StrCat(*i);
      }
      if (value.empty()) continue;
      if (ContainsIgnoreCase(name, "driver_version")) {
        out_->environment.driver_version = value;
      } else if (ContainsIgnoreCase(name, "cuda_version") ||
                 ContainsIgnoreCase(name, "cuda_runtime_version")) {
        out_->environment.cuda_version = value;
      }
    }
  }

  void ReadHost(const XPlane& plane, bool* tf, bool* profctl) {
    const PlaneStats stats(plane);
    const int64_t root_id = stats.Id(xspace::kStatIsRoot);
    const int64_t step_id = stats.Id(xspace::kStatStepNum);
    const int64_t ct_id = stats.Id("_ct");
    const int64_t c_id = stats.Id("_c");
    const int64_t corr_id = stats.Id(xspace::kStatCorrelationId);
    const int64_t tf_op_id = stats.Id("tf_op");
    // Memory profile stats (TSL_WIRE.md).
    const int64_t ordinal_id = stats.Id("device_ordinal");
    const int64_t alloc_bytes_id = stats.Id("allocation_bytes");
    const int64_t requested_id = stats.Id("requested_bytes");
    const int64_t addr_id = stats.Id("addr");
    const int64_t allocator_id = stats.Id("allocator_name");
    const int64_t in_use_id = stats.Id("bytes_allocated");
    const int64_t reserved_id = stats.Id("bytes_reserved");
    const int64_t frag_id = stats.Id("fragmentation");
    for (const XLine& line : plane.lines()) {
      if (absl::StartsWith(line.name(), "pid ")) *profctl = true;
      for (const XEvent& e : line.events()) {
        const XEventMetadata* md = Meta(plane, e);
        if (md == nullptr) continue;
        int64_t start = 0;
        int64_t end = 0;
        if (!Times(plane, line, e, &start, &end)) continue;
        const absl::string_view name = md->name();
        if (name == "MemoryAllocation" || name == "MemoryDeallocation") {
          MemoryEvent m;
          m.time_ns = start;
          const absl::string_view allocator = stats.Str(PlaneStats::Find(e, md, allocator_id));
          m.allocator = out_->strings.Intern(allocator);
          m.device = stats.Int(PlaneStats::Find(e, md, ordinal_id)).value_or(-1);
          if (ContainsIgnoreCase(allocator, "cpu") || ContainsIgnoreCase(allocator, "host")) {
            m.device = -1;
          }
          int64_t bytes = stats.Int(PlaneStats::Find(e, md, alloc_bytes_id)).value_or(-1);
          if (bytes < 0) bytes = stats.Int(PlaneStats::Find(e, md, requested_id)).value_or(0);
          m.bytes = name == "MemoryAllocation" ? bytes : -bytes;
          m.address =
              static_cast<uint64_t>(stats.Int(PlaneStats::Find(e, md, addr_id)).value_or(0));
          m.op = out_->strings.Intern(stats.Str(PlaneStats::Find(e, md, tf_op_id)));
          m.reported_in_use = stats.Int(PlaneStats::Find(e, md, in_use_id)).value_or(-1);
          m.reported_reserved = stats.Int(PlaneStats::Find(e, md, reserved_id)).value_or(-1);
          m.reported_fragmentation = stats.Double(PlaneStats::Find(e, md, frag_id)).value_or(-1.0);
          out_->memory.push_back(m);
          continue;
        }
        HostEvent h;
        h.start_ns = start;
        h.end_ns = end;
        h.thread = line.id();
        h.name = out_->strings.Intern(name);
        if (stats.Int(PlaneStats::Find(e, md, root_id)).value_or(0) >= 1) {
          if (PlaneStats::Find(e, nullptr, step_id) != nullptr ||
              PlaneStats::Find(e, md, step_id) != nullptr) {
            h.role = HostEventRole::kStep;
            out_->host_events.push_back(h);
          }
          continue;
        }
        if (matcher_.Match(name)) {
          h.role = HostEventRole::kStep;
          out_->host_events.push_back(h);
          continue;
        }
        if (PlaneStats::Find(e, nullptr, ct_id) != nullptr ||
            PlaneStats::Find(e, nullptr, c_id) != nullptr) {
          continue;  // a consumer wrapper joining another thread's step root
        }
        h.kind = ClassifyHostOpName(name);
        if (absl::StartsWith(name, "$") && h.kind != OpKind::kHostInputWait) continue;
        h.correlation_id = stats.Int(PlaneStats::Find(e, md, corr_id)).value_or(-1);
        const absl::string_view tf_op = stats.Str(PlaneStats::Find(e, md, tf_op_id));
        const absl::string_view type = TfOpType(tf_op.empty() ? name : tf_op);
        if (IsRuntimeName(name, h.kind)) {
          h.role = HostEventRole::kRuntime;
          h.type = h.name;
        } else if (!type.empty()) {
          h.role = HostEventRole::kFrameworkOp;
          h.type = out_->strings.Intern(type);
          *tf = true;
        } else {
          h.role = HostEventRole::kAnnotation;
          h.type = h.name;
        }
        h.compile = h.kind == OpKind::kHostOther && IsCompileName(name);
        out_->host_events.push_back(h);
      }
    }
  }

  void ReadDevice(const XPlane& plane, absl::string_view prefix, bool* tf, bool* xla) {
    int64_t ordinal = 0;
    if (!absl::SimpleAtoi(absl::string_view(plane.name()).substr(prefix.size()), &ordinal)) {
      warnings_.Note("device planes with a bad ordinal skipped",
                     [&] { return absl::StrCat("plane '", plane.name(), "'"); });
      return;
    }
    const PlaneStats stats(plane);
    DeviceInfo info;
    info.id = ordinal;
    info.name = std::string(stats.Str(stats.PlaneStat("gpu_device_name")));
    if (info.name.empty()) info.name = plane.name();
    info.compute_major =
        static_cast<int32_t>(stats.Int(stats.PlaneStat("compute_cap_major")).value_or(0));
    info.compute_minor =
        static_cast<int32_t>(stats.Int(stats.PlaneStat("compute_cap_minor")).value_or(0));
    info.memory_bytes = stats.Int(stats.PlaneStat("memory_size")).value_or(0);
    out_->environment.devices.push_back(info);

    const int64_t memcpy_id = stats.Id(xspace::kStatMemcpyDetails);
    const int64_t kernel_id = stats.Id(xspace::kStatKernelDetails);
    const int64_t occ_id = stats.Id("theoretical_occupancy_pct");
    const int64_t corr_id = stats.Id(xspace::kStatCorrelationId);
    const int64_t tf_op_id = stats.Id("tf_op");
    const int64_t hlo_op_id = stats.Id("hlo_op");
    const int64_t hlo_category_id = stats.Id("hlo_category");
    const bool tpu = prefix == xspace::kTpuPlanePrefix;
    bool has_xla_ops = false;
    for (const XLine& line : plane.lines()) {
      has_xla_ops |= line.name() == "XLA Ops";
      *xla |= line.name() == "XLA Modules" || line.name() == "XLA Ops";
    }
    *tf |= std::any_of(plane.lines().begin(), plane.lines().end(),
                       [](const XLine& l) { return l.name() == "TensorFlow Ops"; });
    for (const XLine& line : plane.lines()) {
      const bool op_line = line.name() == "XLA Ops" || line.name() == "Framework Ops" ||
                           line.name() == "TensorFlow Ops";
      const bool activity =
          tpu && has_xla_ops ? line.name() == "XLA Ops" : !xspace::IsDerivedLine(line.name());
      if (!op_line && !activity) continue;
      for (const XEvent& e : line.events()) {
        const XEventMetadata* md = Meta(plane, e);
        if (md == nullptr) continue;
        int64_t start = 0;
        int64_t end = 0;
        if (!Times(plane, line, e, &start, &end)) continue;
        const absl::string_view name = md->name();
        if (op_line) {
          DeviceOpSpan span;
          span.start_ns = start;
          span.end_ns = end;
          span.device = ordinal;
          span.line = line.id();
          span.name = out_->strings.Intern(name);
          absl::string_view type = stats.Str(PlaneStats::Find(e, md, hlo_category_id));
          if (type.empty()) type = line.name() == "XLA Ops" ? HloType(name) : TfOpType(name);
          span.type = out_->strings.Intern(type.empty() ? name : type);
          out_->device_ops.push_back(span);
        }
        if (!activity) continue;
        DeviceEvent d;
        d.start_ns = start;
        d.end_ns = end;
        d.device = ordinal;
        d.name = out_->strings.Intern(name);
        std::optional<OpKind> kind =
            MemcpyKindFromDetails(stats.Str(PlaneStats::Find(e, md, memcpy_id)));
        d.kind = kind.value_or(ClassifyDeviceOpName(name));
        d.correlation_id = stats.Int(PlaneStats::Find(e, md, corr_id)).value_or(-1);
        absl::string_view op = stats.Str(PlaneStats::Find(e, md, tf_op_id));
        if (!op.empty()) *tf = true;
        if (op.empty()) op = stats.Str(PlaneStats::Find(e, md, hlo_op_id));
        if (tpu && has_xla_ops && op.empty()) op = name;
        d.op = out_->strings.Intern(op);
        const absl::string_view details = stats.Str(PlaneStats::Find(e, md, kernel_id));
        const std::optional<double> occ = stats.Double(PlaneStats::Find(e, md, occ_id));
        const bool memory_op = absl::StartsWithIgnoreCase(name, "Memcpy") ||
                               absl::StartsWithIgnoreCase(name, "Memset") || kind.has_value();
        d.is_kernel = !memory_op && !(tpu && has_xla_ops);
        if (d.is_kernel && (!details.empty() || occ)) {
          KernelDetails k = ParseKernelDetails(details);
          if (occ) k.occupancy_pct = *occ;
          d.details = static_cast<int32_t>(out_->kernel_details.size());
          out_->kernel_details.push_back(k);
        }
        out_->device_events.push_back(d);
      }
    }
  }

  const XSpace& space_;
  int64_t offset_ns_;
  const StepMatcher& matcher_;
  ToolTrace* out_;
  int64_t profile_start_ = 0;
  int64_t min_start_ = std::numeric_limits<int64_t>::max();
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
  ReaderWarnings warnings_;
};

absl::Status CheckOffset(const std::string& host, int64_t offset_ns) {
  if (offset_ns < -kMaxAbsOffsetNs || offset_ns > kMaxAbsOffsetNs) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, ": clock offset ", offset_ns,
                                                   " ns is out of range (|offset| <= 2^61 ns)"));
  }
  return absl::OkStatus();
}

// --- Kineto ------------------------------------------------------------------------------------

// `text` (a JSON number) times 10^scale, rounded half away from zero, exactly (no double).
bool ScaledDecimal(absl::string_view text, int scale, int64_t* out) {
  bool negative = false;
  if (absl::ConsumePrefix(&text, "-")) negative = true;
  __int128 v = 0;
  int digits = 0;
  int exp10 = scale;
  size_t i = 0;
  bool any = false;
  const auto digit = [&](char c) {
    any = true;
    if (digits < 36) {
      v = v * 10 + (c - '0');
      if (v != 0) ++digits;
      return true;
    }
    return false;
  };
  for (; i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (!digit(text[i])) ++exp10;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (digit(text[i])) --exp10;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    int e = 0;
    if (!absl::SimpleAtoi(text.substr(i + 1), &e) || e > 40 || e < -80) return false;
    exp10 += e;
    i = text.size();
  }
  if (!any || i != text.size()) return false;
  for (; exp10 > 0; --exp10) {
    v *= 10;
    if (v > kInt64Max) return false;
  }
  if (exp10 < 0) {
    if (exp10 < -37) {
      v = 0;
    } else {
      __int128 div = 1;
      for (; exp10 < 0; ++exp10) div *= 10;
      const __int128 rest = v % div;
      v /= div;
      if (2 * rest >= div) ++v;
    }
  }
  if (v > kInt64Max) return false;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

using JsonValue = rapidjson::Value;

const JsonValue* Member(const JsonValue& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}
// Numbers are parsed as strings (kParseNumbersAsStringsFlag): both read as text.
absl::string_view Text(const JsonValue* v) {
  if (v == nullptr || !v->IsString()) return {};
  return absl::string_view(v->GetString(), v->GetStringLength());
}
std::optional<int64_t> IntOf(const JsonValue* v) {
  int64_t x = 0;
  if (v != nullptr && v->IsString() && ScaledDecimal(Text(v), 0, &x)) return x;
  return std::nullopt;
}
std::optional<double> DoubleOf(const JsonValue* v) {
  double x = 0;
  if (v != nullptr && v->IsString() && absl::SimpleAtod(Text(v), &x)) return x;
  return std::nullopt;
}
std::string Serialize(const JsonValue* v) {
  if (v == nullptr || v->IsNull()) return {};
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v->Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}
std::array<int32_t, 3> Dims(const JsonValue* v) {
  std::array<int32_t, 3> d = {0, 0, 0};
  if (v == nullptr || !v->IsArray()) return d;
  for (rapidjson::SizeType i = 0; i < v->Size() && i < 3; ++i) {
    d[i] = static_cast<int32_t>(IntOf(&(*v)[i]).value_or(0));
  }
  return d;
}

enum class KCat : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kOp,
  kAnnotation,
  kRuntime,
  kPython,
  kOther
};

KCat KinetoCat(absl::string_view cat) {
  struct Entry {
    absl::string_view name;
    KCat cat;
  };
  static constexpr Entry kCats[] = {
      {"kernel", KCat::kKernel},        {"gpu_memcpy", KCat::kMemcpy},
      {"memcpy", KCat::kMemcpy},        {"gpu_memset", KCat::kMemset},
      {"memset", KCat::kMemset},        {"cpu_op", KCat::kOp},
      {"operator", KCat::kOp},          {"user_annotation", KCat::kAnnotation},
      {"cuda_runtime", KCat::kRuntime}, {"cuda_driver", KCat::kRuntime},
      {"runtime", KCat::kRuntime},      {"python_function", KCat::kPython},
  };
  for (const Entry& e : kCats) {
    if (absl::EqualsIgnoreCase(cat, e.name)) return e.cat;
  }
  if (absl::EndsWithIgnoreCase(cat, "_runtime") || absl::EndsWithIgnoreCase(cat, "_driver")) {
    return KCat::kRuntime;
  }
  return KCat::kOther;
}

// PyTorch records an allocation inside the op that made it: the op of each memory event is the
// innermost op (cpu_op or user annotation) on its thread that contains its time. Ops per thread
// sorted by start; from the last op starting at or before the time, walk back (at most
// kMaxWalk ops) to the first that still contains it: any containing op that starts later would
// have been met first, so it is the innermost.
void LinkMemoryToOps(const std::vector<int64_t>& threads, ToolTrace* out) {
  constexpr int kMaxWalk = 256;
  absl::flat_hash_map<int64_t, std::vector<const HostEvent*>> ops;
  for (const HostEvent& h : out->host_events) {
    if (h.role == HostEventRole::kFrameworkOp || h.role == HostEventRole::kAnnotation) {
      ops[h.thread].push_back(&h);
    }
  }
  for (auto& [thread, list] : ops) {
    std::sort(list.begin(), list.end(), [](const HostEvent* a, const HostEvent* b) {
      return std::tie(a->start_ns, b->end_ns) < std::tie(b->start_ns, a->end_ns);
    });
  }
  for (size_t i = 0; i < out->memory.size() && i < threads.size(); ++i) {
    MemoryEvent& m = out->memory[i];
    auto it = ops.find(threads[i]);
    if (it == ops.end()) continue;
    const std::vector<const HostEvent*>& list = it->second;
    auto at = std::upper_bound(list.begin(), list.end(), m.time_ns,
                               [](int64_t t, const HostEvent* h) { return t < h->start_ns; });
    for (int walked = 0; at != list.begin() && walked < kMaxWalk; ++walked) {
      --at;
      if ((*at)->end_ns > m.time_ns) {
        m.op = (*at)->name;
        break;
      }
    }
  }
}

// The run's environment from the document's top-level members (PyTorch's profiler writes the
// rank, CUDA versions and devices there); the rank names the host.
void ReadKinetoEnvironment(const JsonValue& doc, ToolTrace* out) {
  const JsonValue* dist = Member(doc, "distributedInfo");
  const JsonValue* rank = dist == nullptr ? nullptr : Member(*dist, "rank");
  int64_t r = -1;
  if (rank != nullptr && rank->IsString() && absl::SimpleAtoi(Text(rank), &r) && r >= 0) {
    out->host = absl::StrCat("rank-", r);
  }
  RunEnvironment& env = out->environment;
  env.framework = "PyTorch";
  env.hostnames.push_back(out->host);
  if (const JsonValue* v = Member(doc, "cuda_runtime_version"))
    env.cuda_version = std::string(Text(v));
  if (const JsonValue* v = Member(doc, "cuda_driver_version"))
    env.driver_version = std::string(Text(v));
  if (const JsonValue* props = Member(doc, "deviceProperties"); props && props->IsArray()) {
    for (const JsonValue& p : props->GetArray()) {
      DeviceInfo d;
      d.id = IntOf(Member(p, "id")).value_or(0);
      d.name = std::string(Text(Member(p, "name")));
      d.compute_major = static_cast<int32_t>(IntOf(Member(p, "computeMajor")).value_or(0));
      d.compute_minor = static_cast<int32_t>(IntOf(Member(p, "computeMinor")).value_or(0));
      d.memory_bytes = IntOf(Member(p, "totalGlobalMem")).value_or(0);
      env.devices.push_back(std::move(d));
    }
  }
}

// Turns a Kineto document's events into one ToolTrace: Add each event of traceEvents in order,
// then Finish. Times move by `shift` (the document's base time less the host's offset).
class KinetoEventReader {
 public:
  KinetoEventReader(ToolTrace* out, __int128 shift, const StepMatcher& matcher)
      : out_(out), shift_(shift), matcher_(matcher) {}

  // Event number `index` of traceEvents.
  void Add(const JsonValue& e, int64_t index) {
    const absl::string_view ph = Text(Member(e, "ph"));
    const absl::string_view name = Text(Member(e, "name"));
    if (ph == "i" || ph == "I") {
      if (name == "[memory]") AddMemory(e);
      return;
    }
    if (ph == "X") AddComplete(e, name, index);
  }

  void Finish() && {
    if (min_start_ <= max_end_) {
      out_->window_start_ns = min_start_;
      out_->window_end_ns = max_end_;
    }
    std::sort(out_->environment.devices.begin(), out_->environment.devices.end(),
              [](const DeviceInfo& a, const DeviceInfo& b) { return a.id < b.id; });
    LinkMemoryToOps(memory_threads_, out_);
    out_->warnings = std::move(warnings_).Finish();
  }

 private:
  // `t` moved by the shift into *out_t; false when that leaves the range of times.
  bool Move(int64_t t, int64_t* out_t) const {
    const __int128 v = t + shift_;
    if (v < -kMaxAbsTimeNs || v > kMaxAbsTimeNs) return false;
    *out_t = static_cast<int64_t>(v);
    return true;
  }

  // An instant "[memory]" event: an allocation (bytes > 0) or a free.
  void AddMemory(const JsonValue& e) {
    int64_t ts = 0;
    const JsonValue* args = Member(e, "args");
    if (args == nullptr || !ScaledDecimal(Text(Member(e, "ts")), 3, &ts)) return;
    MemoryEvent m;
    if (!Move(ts, &m.time_ns)) return;
    const int64_t type = IntOf(Member(*args, "Device Type")).value_or(-1);
    m.device = type == 1 ? IntOf(Member(*args, "Device Id")).value_or(0) : -1;
    m.bytes = IntOf(Member(*args, "Bytes")).value_or(0);
    m.address = static_cast<uint64_t>(IntOf(Member(*args, "Addr")).value_or(0));
    m.reported_in_use = IntOf(Member(*args, "Total Allocated")).value_or(-1);
    m.reported_reserved = IntOf(Member(*args, "Total Reserved")).value_or(-1);
    memory_threads_.push_back(IntOf(Member(e, "tid")).value_or(0));
    out_->memory.push_back(m);
  }

  // A complete ("X") event: a device event or a host one, by its category.
  void AddComplete(const JsonValue& e, absl::string_view name, int64_t index) {
    int64_t ts = 0;
    int64_t dur = 0;
    if (!ScaledDecimal(Text(Member(e, "ts")), 3, &ts) ||
        !ScaledDecimal(Text(Member(e, "dur")), 3, &dur) || dur < 0 || ts < -kMaxAbsTimeNs ||
        ts > kMaxAbsTimeNs || dur > kMaxAbsTimeNs) {
      warnings_.Note("complete events without a valid \"ts\"/\"dur\" dropped",
                     [&] { return absl::StrCat("event #", index, " '", name, "'"); });
      return;
    }
    int64_t start = 0;
    int64_t end = 0;
    if (!Move(ts, &start) || !Move(ts + dur, &end)) {
      warnings_.Note("events out of range once moved by base time and offset dropped",
                     [&] { return absl::StrCat("event #", index); });
      return;
    }
    const KCat cat = KinetoCat(Text(Member(e, "cat")));
    const JsonValue* args = Member(e, "args");
    static const JsonValue kNull;
    const JsonValue& a = args != nullptr ? *args : kNull;
    min_start_ = std::min(min_start_, start);
    max_end_ = std::max(max_end_, end);
    switch (cat) {
      case KCat::kKernel:
      case KCat::kMemcpy:
      case KCat::kMemset:
        AddDeviceEvent(e, a, cat, name, index, start, end);
        break;
      case KCat::kOp:
      case KCat::kAnnotation:
      case KCat::kRuntime:
      case KCat::kPython:
        AddHostEvent(e, a, cat, name, start, end);
        break;
      case KCat::kOther:
        break;
    }
  }

  // A kernel, memcpy or memset on the device of args.device (else the integer pid).
  void AddDeviceEvent(const JsonValue& e, const JsonValue& a, KCat cat, absl::string_view name,
                      int64_t index, int64_t start, int64_t end) {
    std::optional<int64_t> device = IntOf(Member(a, "device"));
    if (!device) device = IntOf(Member(e, "pid"));
    if (!device) {
      warnings_.Note("device events without args.device or an integer pid dropped",
                     [&] { return absl::StrCat("event #", index, " '", name, "'"); });
      return;
    }
    DeviceEvent d;
    d.start_ns = start;
    d.end_ns = end;
    d.device = *device;
    d.name = out_->strings.Intern(name);
    d.kind = cat == KCat::kMemset ? OpKind::kDeviceCompute : ClassifyDeviceOpName(name);
    d.is_kernel = cat == KCat::kKernel;
    d.correlation_id = IntOf(Member(a, "correlation")).value_or(-1);
    d.link_id = IntOf(Member(a, "External id")).value_or(-1);
    if (d.is_kernel) {
      KernelDetails k;
      k.registers_per_thread =
          static_cast<int32_t>(IntOf(Member(a, "registers per thread")).value_or(-1));
      k.static_shared_bytes = IntOf(Member(a, "shared memory")).value_or(-1);
      k.grid = Dims(Member(a, "grid"));
      k.block = Dims(Member(a, "block"));
      k.occupancy_pct = DoubleOf(Member(a, "est. achieved occupancy %")).value_or(-1.0);
      d.details = static_cast<int32_t>(out_->kernel_details.size());
      out_->kernel_details.push_back(k);
    }
    out_->device_events.push_back(d);
  }

  // An op, annotation, runtime call or Python function (only input waits of the last) on the
  // host; an op or annotation the step matcher matches is a step.
  void AddHostEvent(const JsonValue& e, const JsonValue& a, KCat cat, absl::string_view name,
                    int64_t start, int64_t end) {
    HostEvent h;
    h.start_ns = start;
    h.end_ns = end;
    h.thread = IntOf(Member(e, "tid")).value_or(0);
    h.name = out_->strings.Intern(name);
    h.type = h.name;
    if (cat != KCat::kRuntime && cat != KCat::kPython && matcher_.Match(name)) {
      h.role = HostEventRole::kStep;
      out_->host_events.push_back(h);
      return;
    }
    h.kind = ClassifyHostOpName(name);
    if (cat == KCat::kPython && h.kind != OpKind::kHostInputWait) return;
    h.role = cat == KCat::kOp        ? HostEventRole::kFrameworkOp
             : cat == KCat::kRuntime ? HostEventRole::kRuntime
                                     : HostEventRole::kAnnotation;
    h.compile = h.kind == OpKind::kHostOther && IsCompileName(name);
    h.correlation_id = IntOf(Member(a, "correlation")).value_or(-1);
    h.link_id = IntOf(Member(a, "External id")).value_or(-1);
    if (const JsonValue* dims = Member(a, "Input Dims")) {
      h.input_dims = out_->strings.Intern(Serialize(dims));
    }
    if (const JsonValue* types = Member(a, "Input type")) {
      h.input_types = out_->strings.Intern(Serialize(types));
    }
    out_->host_events.push_back(h);
  }

  ToolTrace* out_;
  const __int128 shift_;
  const StepMatcher& matcher_;
  ReaderWarnings warnings_;
  int64_t min_start_ = kInt64Max;
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> memory_threads_;  // the `tid` of each out_->memory event
};

absl::StatusOr<ToolTrace> ReadKineto(absl::string_view json, const std::string& default_host,
                                     int64_t offset_ns, const StepMatcher& matcher) {
  rapidjson::Document doc;
  constexpr unsigned kFlags =
      rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseTrailingCommasFlag;
  doc.Parse<kFlags>(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace of ", default_host, ": invalid JSON at offset ",
                     doc.GetErrorOffset(), ": ", rapidjson::GetParseError_En(doc.GetParseError())));
  }
  const JsonValue* events = doc.IsArray() ? &doc : Member(doc, "traceEvents");
  if (events == nullptr || !events->IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace of ", default_host,
                     ": no \"traceEvents\" array: not a PyTorch profiler (Chrome trace) file"));
  }
  ToolTrace out;
  out.host = default_host;
  int64_t base = 0;
  if (doc.IsObject()) {
    (void)ScaledDecimal(Text(Member(doc, "baseTimeNanoseconds")), 0, &base);
    ReadKinetoEnvironment(doc, &out);
  }
  KinetoEventReader reader(&out, static_cast<__int128>(base) - offset_ns, matcher);
  int64_t index = -1;
  for (const JsonValue& e : events->GetArray()) reader.Add(e, ++index);
  std::move(reader).Finish();
  return out;
}

}  // namespace

absl::StatusOr<ToolTrace> ReadXSpaceTools(const XSpace& space, const std::string& host,
                                          int64_t offset_ns, const ReaderOptions& options) {
  absl::StatusOr<StepMatcher> matcher = StepMatcher::Create(options.step_pattern);
  if (!matcher.ok()) return matcher.status();
  if (absl::Status s = CheckOffset(host, offset_ns); !s.ok()) return s;
  const bool any_trace_plane =
      std::any_of(space.planes().begin(), space.planes().end(), [](const XPlane& p) {
        return p.name() == xspace::kHostPlaneName ||
               absl::StartsWith(p.name(), xspace::kGpuPlanePrefix) ||
               absl::StartsWith(p.name(), xspace::kTpuPlanePrefix) ||
               absl::StartsWith(p.name(), xspace::kCustomPlanePrefix);
      });
  if (!any_trace_plane) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host ", host, ": the XSpace has no /host:CPU and no /device:{GPU,TPU,CUSTOM}:N plane (",
        space.planes_size(), " planes): not a host trace"));
  }
  ToolTrace out;
  out.host = host;
  XSpaceToolReader(space, offset_ns, *matcher, &out).Read();
  return out;
}

absl::StatusOr<ToolTrace> ReadXSpaceToolsBytes(absl::string_view bytes, const std::string& host,
                                               int64_t offset_ns, const ReaderOptions& options) {
  XSpace space;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !space.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat("host ", host, ": not a valid serialized XSpace (", bytes.size(), " bytes)"));
  }
  return ReadXSpaceTools(space, host, offset_ns, options);
}

absl::StatusOr<ToolTrace> ReadKinetoTools(absl::string_view json_text,
                                          const std::string& default_host, int64_t offset_ns,
                                          const ReaderOptions& options) {
  absl::StatusOr<StepMatcher> matcher = StepMatcher::Create(options.step_pattern);
  if (!matcher.ok()) return matcher.status();
  if (absl::Status s = CheckOffset(default_host, offset_ns); !s.ok()) return s;
  return ReadKineto(json_text, default_host, offset_ns, *matcher);
}

absl::StatusOr<ToolTrace> ReadKinetoToolsFile(absl::string_view contents, absl::string_view path,
                                              int64_t offset_ns, const ReaderOptions& options) {
  std::string inflated;
  absl::StatusOr<absl::string_view> text = GunzipIfCompressed(contents, path, &inflated);
  if (!text.ok()) return text.status();
  contents = *text;
  absl::StatusOr<ToolTrace> trace =
      ReadKinetoTools(contents, KinetoFileStem(path), offset_ns, options);
  if (!trace.ok()) {
    return absl::Status(trace.status().code(), absl::StrCat(path, ": ", trace.status().message()));
  }
  return trace;
}

}  // namespace profctl::analysis
