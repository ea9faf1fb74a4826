#include "coordinator/analysis/xspace_reader.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/xspace.h"

namespace profctl::analysis {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

// XProf's derived lines: they repeat, nested, the time of the device's own lines.
constexpr std::array<absl::string_view, 10> kDerivedLines = {"Steps",
                                                             "XLA Modules",
                                                             "XLA Ops",
                                                             "Framework Ops",
                                                             "TensorFlow Ops",
                                                             "TensorFlow Name Scope",
                                                             "Framework Name Scope",
                                                             "Source code",
                                                             "Launch Stats",
                                                             "_counters_"};
constexpr absl::string_view kXlaOpsLine = "XLA Ops";
constexpr size_t kMaxPassedOnMessages = 10;

bool IsDerivedLine(absl::string_view name) {
  return std::find(kDerivedLines.begin(), kDerivedLines.end(), name) != kDerivedLines.end();
}

// Per-plane lookup from event metadata id to a precomputed value: a vector when the ids are
// dense (the usual 1..N), a hash map otherwise.
template <typename T>
class IdTable {
 public:
  template <typename F>
  IdTable(const XPlane& plane, F&& make) {
    const auto& md = plane.event_metadata();
    int64_t max_id = -1;
    bool dense = true;
    for (const auto& [id, unused] : md) {
      if (id < 0) dense = false;
      max_id = std::max(max_id, id);
    }
    dense = dense && max_id < 4 * static_cast<int64_t>(md.size()) + 1024;
    if (dense) {
      dense_.resize(static_cast<size_t>(max_id + 1));
      for (const auto& [id, m] : md) dense_[static_cast<size_t>(id)] = make(m);
    } else {
      sparse_.reserve(md.size());
      for (const auto& [id, m] : md) sparse_.emplace(id, make(m));
    }
    dense_mode_ = dense;
  }

  // nullptr when the id has no metadata.
  const T* Find(int64_t id) const {
    if (dense_mode_) {
      if (id < 0 || static_cast<uint64_t>(id) >= dense_.size()) return nullptr;
      const std::optional<T>& v = dense_[static_cast<size_t>(id)];
      return v ? &*v : nullptr;
    }
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }

 private:
  bool dense_mode_ = true;
  std::vector<std::optional<T>> dense_;
  absl::flat_hash_map<int64_t, T> sparse_;
};

std::optional<int64_t> StatIdByName(const XPlane& plane, absl::string_view name) {
  for (const auto& [id, md] : plane.stat_metadata()) {
    if (md.name() == name) return id;
  }
  return std::nullopt;
}

// An integer stat value (int64, or uint64 within int64), else nullopt.
std::optional<int64_t> IntValue(const XStat& s) {
  if (s.value_case() == XStat::kInt64Value) return s.int64_value();
  if (s.value_case() == XStat::kUint64Value &&
      s.uint64_value() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(s.uint64_value());
  }
  return std::nullopt;
}

// A string stat value: str_value, or ref_value naming a stat metadata entry.
absl::string_view StrValue(const XPlane& plane, const XStat& s) {
  if (s.value_case() == XStat::kStrValue) return s.str_value();
  if (s.value_case() == XStat::kRefValue) {
    auto it = plane.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
    if (it != plane.stat_metadata().end()) return it->second.name();
  }
  return {};
}

// Shared state of one read.
class Reader {
 public:
  Reader(const XSpace& space, int64_t offset_ns, const StepMatcher& matcher, HostTrace* trace)
      : profile_start_(xspace::ProfileStartNs(space)),
        offset_ns_(offset_ns),
        matcher_(matcher),
        trace_(trace) {}

  void ReadHostPlane(const XPlane& plane);
  void ReadDevicePlane(const XPlane& plane, absl::string_view prefix);
  ReaderWarnings& warnings() { return warnings_; }
  bool any_event() const { return min_start_ <= max_end_; }
  int64_t min_start() const { return min_start_; }
  int64_t max_end() const { return max_end_; }

 private:
  static std::string Where(const XPlane& plane, const XLine& line, int event_index) {
    return absl::StrCat("plane ", plane.name(), " line ", line.id(), " '", line.name(), "' event #",
                        event_index);
  }

  // The event's [start, end) on the common timeline, or false (with a warning) when dropped.
  bool Times(const XPlane& plane, const XLine& line, int index, const XEvent& event, int64_t* start,
             int64_t* end) {
    if (event.duration_ps() < 0) {
      warnings_.Note("events with negative duration dropped", [&] {
        return absl::StrCat(Where(plane, line, index), " duration_ps ", event.duration_ps());
      });
      return false;
    }
    const int64_t s = xspace::EventStartNs(profile_start_, line, event);
    const int64_t e = xspace::EventEndNs(profile_start_, line, event);
    if (s < -kMaxAbsTimeNs || e > kMaxAbsTimeNs || s > e) {
      warnings_.Note("events with times out of range dropped", [&] {
        return absl::StrCat(Where(plane, line, index), " start ", s, " ns end ", e, " ns");
      });
      return false;
    }
    *start = s - offset_ns_;
    *end = e - offset_ns_;
    min_start_ = std::min(min_start_, *start);
    max_end_ = std::max(max_end_, *end);
    return true;
  }

  void UnknownMetadata(const XPlane& plane, const XLine& line, int index, const XEvent& event) {
    warnings_.Note("events with an undefined metadata id dropped", [&] {
      return absl::StrCat(Where(plane, line, index), " metadata_id ", event.metadata_id());
    });
  }

  int64_t profile_start_;
  int64_t offset_ns_;
  const StepMatcher& matcher_;
  HostTrace* trace_;
  ReaderWarnings warnings_;
  int64_t min_start_ = std::numeric_limits<int64_t>::max();
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
};

// What a host event metadata id is, decided once per plane.
enum class HostRole : uint8_t { kOp, kWrapper, kMarker };
struct HostMeta {
  HostRole role = HostRole::kOp;
  OpKind kind = OpKind::kHostOther;
  bool root = false;      // the metadata itself carries `_r` >= 1
  bool bad_step = false;  // the name matched the step pattern with an unusable number
  int64_t step = 0;       // kMarker: the step number from the name
};

void Reader::ReadHostPlane(const XPlane& plane) {
  const std::optional<int64_t> r_id = StatIdByName(plane, xspace::kStatIsRoot);
  const std::optional<int64_t> step_id = StatIdByName(plane, xspace::kStatStepNum);
  const bool scan_stats = r_id.has_value() || step_id.has_value();
  const IdTable<HostMeta> table(plane, [&](const XEventMetadata& md) {
    HostMeta m;
    const absl::string_view name = md.name();
    for (const XStat& s : md.stats()) {
      if (r_id && s.metadata_id() == *r_id) m.root = IntValue(s).value_or(0) >= 1;
    }
    if (std::optional<int64_t> step = matcher_.Match(name, &m.bad_step)) {
      m.role = HostRole::kMarker;
      m.step = *step;
      return m;
    }
    m.kind = ClassifyHostOpName(name);
    if (absl::StartsWith(name, "$") && m.kind != OpKind::kHostInputWait) {
      m.role = HostRole::kWrapper;  // a Python stack frame
    }
    return m;
  });

  for (const XLine& line : plane.lines()) {
    int index = -1;
    for (const XEvent& event : line.events()) {
      ++index;
      const HostMeta* meta = table.Find(event.metadata_id());
      if (meta == nullptr) {
        UnknownMetadata(plane, line, index, event);
        continue;
      }
      int64_t start = 0;
      int64_t end = 0;
      if (!Times(plane, line, index, event, &start, &end)) continue;
      bool root = meta->root;
      std::optional<int64_t> step_num;
      bool bad_step_num = false;
      if (scan_stats) {
        for (const XStat& s : event.stats()) {
          if (r_id && s.metadata_id() == *r_id) {
            root = IntValue(s).value_or(0) >= 1;
          } else if (step_id && s.metadata_id() == *step_id) {
            step_num = IntValue(s);
            bad_step_num = !step_num.has_value() || *step_num < 0;
          }
        }
      }
      if (root) {
        // A step root spans the step: a marker when it has a step number, a wrapper anyway.
        if (step_num && !bad_step_num) {
          trace_->steps.push_back(StepMarker{*step_num, start, end, line.id()});
        } else {
          warnings_.Note("step roots (_r) without a non-negative integer step_num ignored",
                         [&] { return Where(plane, line, index); });
        }
        continue;
      }
      switch (meta->role) {
        case HostRole::kMarker:
          trace_->steps.push_back(StepMarker{meta->step, start, end, line.id()});
          break;
        case HostRole::kWrapper:
          break;
        case HostRole::kOp:
          if (meta->bad_step) {
            warnings_.Note("events named like step markers with a step number out of range", [&] {
              return absl::StrCat(Where(plane, line, index), " '",
                                  plane.event_metadata().at(event.metadata_id()).name(), "'");
            });
          }
          trace_->host_ops.push_back(Op{start, end, meta->kind});
          break;
      }
    }
  }
}

// What a device event metadata id is.
struct DeviceMeta {
  OpKind kind = OpKind::kDeviceCompute;
};

void Reader::ReadDevicePlane(const XPlane& plane, absl::string_view prefix) {
  int64_t ordinal = 0;
  if (!absl::SimpleAtoi(absl::string_view(plane.name()).substr(prefix.size()), &ordinal)) {
    warnings_.Note("device planes with a bad ordinal skipped",
                   [&] { return absl::StrCat("plane '", plane.name(), "'"); });
    return;
  }
  DeviceTrace device;
  device.id = ordinal;
  device.name = plane.name();

  // Which lines hold the device's activity (see the header).
  const bool tpu = prefix == xspace::kTpuPlanePrefix;
  bool has_xla_ops = false;
  size_t events = 0;
  for (const XLine& line : plane.lines()) has_xla_ops |= line.name() == kXlaOpsLine;
  auto use_line = [&](const XLine& line) {
    if (tpu && has_xla_ops) return line.name() == kXlaOpsLine;
    return !IsDerivedLine(line.name());
  };
  for (const XLine& line : plane.lines()) {
    if (use_line(line)) events += static_cast<size_t>(line.events_size());
  }
  device.ops.reserve(events);

  const std::optional<int64_t> details_id = StatIdByName(plane, xspace::kStatMemcpyDetails);
  const IdTable<DeviceMeta> table(plane, [&](const XEventMetadata& md) {
    DeviceMeta m;
    std::optional<OpKind> from_details;
    if (details_id) {
      for (const XStat& s : md.stats()) {
        if (s.metadata_id() == *details_id) {
          from_details = MemcpyKindFromDetails(StrValue(plane, s));
        }
      }
    }
    m.kind = from_details.value_or(ClassifyDeviceOpName(md.name()));
    return m;
  });

  for (const XLine& line : plane.lines()) {
    if (!use_line(line)) continue;
    int index = -1;
    for (const XEvent& event : line.events()) {
      ++index;
      const DeviceMeta* meta = table.Find(event.metadata_id());
      if (meta == nullptr) {
        UnknownMetadata(plane, line, index, event);
        continue;
      }
      int64_t start = 0;
      int64_t end = 0;
      if (!Times(plane, line, index, event, &start, &end)) continue;
      OpKind kind = meta->kind;
      if (details_id) {
        for (const XStat& s : event.stats()) {
          if (s.metadata_id() != *details_id) continue;
          if (std::optional<OpKind> k = MemcpyKindFromDetails(StrValue(plane, s))) kind = *k;
        }
      }
      device.ops.push_back(Op{start, end, kind});
    }
  }
  trace_->devices.push_back(std::move(device));
}

void PassOn(absl::string_view what, const google::protobuf::RepeatedPtrField<std::string>& from,
            ReaderWarnings* warnings) {
  size_t n = 0;
  for (const std::string& message : from) {
    if (n++ == kMaxPassedOnMessages) {
      warnings->Add(absl::StrCat("trace ", what, ": ", from.size() - kMaxPassedOnMessages,
                                 " more not shown"));
      break;
    }
    warnings->Add(absl::StrCat("trace ", what, ": ", message));
  }
}

}  // namespace

absl::StatusOr<HostTrace> ReadXSpaceHost(const XSpace& space, const std::string& host,
                                         int64_t offset_ns, const ReaderOptions& options) {
  PROFCTL_ASSIGN_OR_RETURN(const StepMatcher matcher, StepMatcher::Create(options.step_pattern));
  if (offset_ns < -kMaxAbsOffsetNs || offset_ns > kMaxAbsOffsetNs) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, ": clock offset ", offset_ns,
                                                   " ns is out of range (|offset| <= 2^61 ns)"));
  }
  const int64_t profile_start = xspace::ProfileStartNs(space);
  const std::optional<int64_t> profile_stop = xspace::ProfileStopNs(space);
  if (profile_start > kMaxAbsTimeNs || (profile_stop && *profile_stop > kMaxAbsTimeNs)) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, ": profile window [",
                                                   profile_start, ", ", profile_stop.value_or(0),
                                                   "] ns is out of range (<= 2^62 ns)"));
  }

  HostTrace trace;
  trace.host = host;
  Reader reader(space, offset_ns, matcher, &trace);
  bool host_plane = false;
  for (const XPlane& plane : space.planes()) {
    if (plane.name() == xspace::kHostPlaneName) {
      host_plane = true;
      reader.ReadHostPlane(plane);
      continue;
    }
    for (const absl::string_view prefix :
         {xspace::kGpuPlanePrefix, xspace::kTpuPlanePrefix, xspace::kCustomPlanePrefix}) {
      if (absl::StartsWith(plane.name(), prefix)) {
        host_plane = true;  // a host trace after all, if only of its devices
        reader.ReadDevicePlane(plane, prefix);
        break;
      }
    }
  }
  if (!host_plane) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host ", host, ": the XSpace has no /host:CPU and no /device:{GPU,TPU,CUSTOM}:N plane (",
        space.planes_size(), " planes): not a host trace"));
  }

  // The window.
  if (profile_start > 0) {
    trace.window_start_ns = profile_start - offset_ns;
    if (profile_stop && *profile_stop >= profile_start) {
      trace.window_end_ns = *profile_stop - offset_ns;
    } else {
      if (profile_stop) {
        reader.warnings().Add(absl::StrCat("profile_stop_time ", *profile_stop,
                                           " is before profile_start_time ", profile_start,
                                           ": window ends at the last event"));
      }
      trace.window_end_ns = std::max(trace.window_start_ns, reader.max_end());
    }
  } else if (reader.any_event()) {
    trace.window_start_ns = reader.min_start();
    trace.window_end_ns = reader.max_end();
  }
  if (!reader.any_event()) reader.warnings().Add("the trace has no events");

  std::sort(trace.steps.begin(), trace.steps.end(), [](const StepMarker& a, const StepMarker& b) {
    return std::tie(a.start_ns, a.step, a.thread_id, a.end_ns) <
           std::tie(b.start_ns, b.step, b.thread_id, b.end_ns);
  });
  PassOn("error", space.errors(), &reader.warnings());
  PassOn("warning", space.warnings(), &reader.warnings());
  trace.warnings = std::move(reader.warnings()).Finish();
  return trace;
}

}  // namespace profctl::analysis
