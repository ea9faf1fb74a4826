// The XSpace reader of the tools' trace (tool_readers.h): host, device and memory events, the
// run environment and the window of one decoded XSpace, by the breakdown's rules.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "analysis/alignment.h"
#include "analysis/tools/tool_readers_internal.h"
#include "xspace/xspace.h"

namespace profctl::analysis::tool_readers_internal {

namespace {

// TensorFlow's DataType enum (types.proto) as the memory profile's `data_type` writes it.
std::string DataTypeName(int64_t code) {
  static constexpr std::array<std::pair<int64_t, absl::string_view>, 17> kNames = {{
      {1, "float"},
      {2, "double"},
      {3, "int32"},
      {4, "uint8"},
      {5, "int16"},
      {6, "int8"},
      {7, "string"},
      {8, "complex64"},
      {9, "int64"},
      {10, "bool"},
      {14, "bfloat16"},
      {17, "uint16"},
      {18, "complex128"},
      {19, "half"},
      {20, "resource"},
      {22, "uint32"},
      {23, "uint64"},
  }};
  for (const auto& [c, name] : kNames) {
    if (c == code) return std::string(name);
  }
  return absl::StrCat("DataType ", code);
}

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

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
    const int64_t available_id = stats.Id("bytes_available");
    const int64_t peak_id = stats.Id("peak_bytes_in_use");
    const int64_t step_stat_id = stats.Id("step_id");
    const int64_t region_id = stats.Id("region_type");
    const int64_t data_type_id = stats.Id("data_type");
    const int64_t shape_id = stats.Id("shape");
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
          m.reported_available = stats.Int(PlaneStats::Find(e, md, available_id)).value_or(-1);
          m.reported_peak = stats.Int(PlaneStats::Find(e, md, peak_id)).value_or(-1);
          m.requested_bytes = stats.Int(PlaneStats::Find(e, md, requested_id)).value_or(-1);
          m.step = stats.Int(PlaneStats::Find(e, md, step_stat_id)).value_or(-1);
          m.region_type = out_->strings.Intern(stats.Str(PlaneStats::Find(e, md, region_id)));
          const XStat* data_type = PlaneStats::Find(e, md, data_type_id);
          if (std::optional<int64_t> code = stats.Int(data_type)) {
            m.data_type = out_->strings.Intern(DataTypeName(*code));
          } else {
            m.data_type = out_->strings.Intern(stats.Str(data_type));
          }
          m.shape = out_->strings.Intern(stats.Str(PlaneStats::Find(e, md, shape_id)));
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
    info.device_type = std::string(stats.Str(stats.PlaneStat("device_type_string")));
    info.peak_tflops = stats.Double(stats.PlaneStat("peak_teraflops_per_second")).value_or(0.0);
    out_->environment.devices.push_back(info);

    const int64_t memcpy_id = stats.Id(xspace::kStatMemcpyDetails);
    const int64_t kernel_id = stats.Id(xspace::kStatKernelDetails);
    const int64_t occ_id = stats.Id("theoretical_occupancy_pct");
    const int64_t corr_id = stats.Id(xspace::kStatCorrelationId);
    const int64_t tf_op_id = stats.Id("tf_op");
    const int64_t hlo_op_id = stats.Id("hlo_op");
    const int64_t hlo_category_id = stats.Id("hlo_category");
    const int64_t flops_id = stats.Id("flops");
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
          span.flops = stats.Int(PlaneStats::Find(e, md, flops_id)).value_or(-1);
          out_->device_ops.push_back(span);
        }
        if (!activity) continue;
        DeviceEvent d;
        d.start_ns = start;
        d.end_ns = end;
        d.device = ordinal;
        d.stream = static_cast<int32_t>(line.id());
        d.name = out_->strings.Intern(name);
        std::optional<OpKind> kind =
            MemcpyKindFromDetails(stats.Str(PlaneStats::Find(e, md, memcpy_id)));
        d.kind = kind.value_or(ClassifyDeviceOpName(name));
        d.correlation_id = stats.Int(PlaneStats::Find(e, md, corr_id)).value_or(-1);
        absl::string_view op = stats.Str(PlaneStats::Find(e, md, tf_op_id));
        // profctl's CUPTI path names device work with no framework op after its NVTX range or
        // launch call, for XProf: not a framework op (the tools take the launch's op instead).
        if (xspace::IsCuptiDerivedOp(op)) op = {};
        if (!op.empty()) *tf = true;
        if (tpu && has_xla_ops) {
          // The op profile of a TPU is by XLA op and its category, with its FLOPs, whether or
          // not the event also names its framework op (TensorFlow's and JAX's do: `tf_op`).
          op = name;
          absl::string_view category = stats.Str(PlaneStats::Find(e, md, hlo_category_id));
          if (category.empty()) category = HloType(name);
          d.op_type = out_->strings.Intern(category);
          d.flops = stats.Int(PlaneStats::Find(e, md, flops_id)).value_or(-1);
        } else if (op.empty()) {
          op = stats.Str(PlaneStats::Find(e, md, hlo_op_id));
        }
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

}  // namespace

void ReadXSpaceToolEvents(const XSpace& space, int64_t offset_ns, const StepMatcher& matcher,
                          ToolTrace* out) {
  XSpaceToolReader(space, offset_ns, matcher, out).Read();
}

}  // namespace profctl::analysis::tool_readers_internal
