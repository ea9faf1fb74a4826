#include "report/pod_trace_writer.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "report/pod_trace_flows.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

namespace profctl::report {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

constexpr size_t kFlushBytes = 64 << 10;

int64_t SaturatingDiff(int64_t a, int64_t b, int64_t c) {
  const __int128 v = static_cast<__int128>(a) - b - c;
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

// Microseconds with three decimals, from integer nanoseconds (exact, no floating point).
void AppendMicros(std::string* out, int64_t ns) {
  uint64_t mag = static_cast<uint64_t>(ns);
  if (ns < 0) {
    out->push_back('-');
    mag = ~mag + 1;  // |ns|, also for INT64_MIN
  }
  absl::StrAppend(out, mag / 1000);
  const uint64_t frac = mag % 1000;
  if (frac != 0) {
    const char buf[5] = {'.', static_cast<char>('0' + frac / 100),
                         static_cast<char>('0' + frac / 10 % 10),
                         static_cast<char>('0' + frac % 10), 0};
    out->append(buf);
  }
}

// A plane's names rendered as JSON once each, however many events carry them: event names (with
// their quotes) and whether they are memory events, stat keys ("name":), and ref values. Filled
// as they are first asked for.
class PlaneNames {
 public:
  explicit PlaneNames(const XPlane& plane) : plane_(plane) {}

  struct Event {
    std::string json;  // the quoted name
    bool memory = false;
  };
  const Event& EventOf(int64_t metadata_id) {
    auto [it, inserted] = events_.try_emplace(metadata_id);
    if (inserted) {
      auto md = plane_.event_metadata().find(metadata_id);
      const absl::string_view name =
          md == plane_.event_metadata().end() ? absl::string_view() : md->second.name();
      AppendJsonString(&it->second.json, name);
      it->second.memory = name == "MemoryAllocation" || name == "MemoryDeallocation";
    }
    return it->second;
  }
  // `"name":` of stat metadata `id` ("stat_<id>" when it has none).
  const std::string& StatKey(int64_t id) {
    auto [it, inserted] = stat_keys_.try_emplace(id);
    if (inserted) {
      auto md = plane_.stat_metadata().find(id);
      AppendJsonString(&it->second, md == plane_.stat_metadata().end() ? absl::StrCat("stat_", id)
                                                                       : md->second.name());
      it->second.push_back(':');
    }
    return it->second;
  }
  // A ref value: the quoted name of stat metadata `id` ("" when it has none).
  const std::string& Ref(uint64_t id) {
    auto [it, inserted] = refs_.try_emplace(id);
    if (inserted) {
      auto md = plane_.stat_metadata().find(static_cast<int64_t>(id));
      AppendJsonString(&it->second, md == plane_.stat_metadata().end() ? absl::string_view()
                                                                       : md->second.name());
    }
    return it->second;
  }

 private:
  const XPlane& plane_;
  absl::flat_hash_map<int64_t, Event> events_;
  absl::flat_hash_map<int64_t, std::string> stat_keys_;
  absl::flat_hash_map<uint64_t, std::string> refs_;
};

void AppendStatValue(std::string* out, const XStat& s, PlaneNames& names) {
  switch (s.value_case()) {
    case XStat::kDoubleValue:
      AppendJsonDouble(out, s.double_value());
      break;
    case XStat::kUint64Value:
      absl::StrAppend(out, s.uint64_value());
      break;
    case XStat::kInt64Value:
      absl::StrAppend(out, s.int64_value());
      break;
    case XStat::kStrValue:
      AppendJsonString(out, s.str_value());
      break;
    case XStat::kBytesValue:
      AppendJsonString(out, absl::StrCat("<", s.bytes_value().size(), " bytes>"));
      break;
    case XStat::kRefValue:
      out->append(names.Ref(s.ref_value()));
      break;
    default:
      out->append("null");
  }
}

}  // namespace

absl::StatusOr<PodTraceWriter> PodTraceWriter::Open(const std::string& path, int64_t base_ns,
                                                    int level) {
  absl::StatusOr<GzipFileWriter> out = GzipFileWriter::Open(path, level);
  if (!out.ok()) return out.status();
  PodTraceWriter w(*std::move(out), base_ns, level);
  w.error_ = w.out_.Append(
      absl::StrCat("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"base_time_ns\":", base_ns,
                   ",\"producer\":\"profctl\"},\"traceEvents\":[\n"));
  if (!w.error_.ok()) return w.error_;
  return w;
}

absl::StatusOr<RenderedHost> PodTraceWriter::Render(absl::string_view host, const XSpace& space,
                                                    int64_t offset_ns, int64_t base_ns,
                                                    int64_t host_index, int level) {
  RenderedHost out;
  out.host_index = host_index;
  out.base_ns = base_ns;
  PieceDeflater deflater(level);
  std::string buffer;
  bool first = true;
  auto begin_event = [&] {
    if (!first) buffer.append(",\n");
    first = false;
  };
  auto flush = [&](size_t threshold) {
    if (buffer.size() < threshold) return;
    deflater.Append(buffer);
    buffer.clear();
  };
  const int64_t profile_start = xspace::ProfileStartNs(space);
  pod_trace::FlowIndex flows = pod_trace::IndexFlows(space, kPidsPerHost - 1);
  std::optional<xspace::DerivedLinesBuilder> derived;  // made at the first GPU plane
  // Coordinator-clock time relative to the base, in trace microseconds.
  auto append_ts = [&](int64_t agent_ns) {
    AppendMicros(&buffer, SaturatingDiff(agent_ns, offset_ns, base_ns));
  };
  int64_t pid = host_index * kPidsPerHost;
  for (const XPlane& plane : space.planes()) {
    if (plane.lines_size() == 0) continue;
    if (pid + 1 >= (host_index + 1) * kPidsPerHost) {
      ++out.planes_skipped;
      continue;
    }
    ++pid;
    begin_event();
    absl::StrAppend(&buffer, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
                    ",\"args\":{\"name\":");
    AppendJsonString(&buffer, absl::StrCat(host, " ", plane.name()));
    buffer.append("}}");
    begin_event();
    absl::StrAppend(&buffer, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", pid,
                    ",\"args\":{\"sort_index\":", pid, "}}");
    const xspace::XPlaneReader reader(plane);
    PlaneNames names(plane);
    const pod_trace::PlaneKind kind = pod_trace::KindOf(plane);
    const std::optional<int64_t> corr_id = reader.StatId(xspace::kStatCorrelationId);
    const std::optional<int64_t> in_use_id = reader.StatId("bytes_allocated");
    const std::optional<int64_t> ordinal_id = reader.StatId("device_ordinal");
    for (const XLine& line : plane.lines()) {
      const int64_t tid = line.display_id() != 0 ? line.display_id() : line.id();
      begin_event();
      absl::StrAppend(&buffer, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":{\"name\":");
      AppendJsonString(&buffer, line.display_name().empty() ? line.name() : line.display_name());
      buffer.append("}}");
      for (const XEvent& event : line.events()) {
        if (event.data_case() == XEvent::kNumOccurrences) continue;
        const int64_t start_ns = xspace::EventStartNs(profile_start, line, event);
        const PlaneNames::Event& name = names.EventOf(event.metadata_id());
        // A launch or its device work: the end of a flow, which binds to this slice.
        std::optional<size_t> flow_at;
        if (kind != pod_trace::PlaneKind::kOther) {
          const std::optional<uint64_t> corr = pod_trace::IntStat(event, corr_id);
          flow_at = corr.has_value() ? flows.Find(*corr) : std::nullopt;
          const std::vector<uint8_t>& written =
              kind == pod_trace::PlaneKind::kHost ? flows.started : flows.finished;
          if (flow_at.has_value() && written[*flow_at] != 0) flow_at.reset();
        }
        begin_event();
        buffer.append("{\"ph\":\"X\",\"name\":");
        buffer.append(name.json);
        if (flow_at.has_value()) buffer.append(",\"cat\":\"launch\"");
        absl::StrAppend(&buffer, ",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":");
        const size_t ts_at = buffer.size();
        append_ts(start_ns);
        const size_t ts_end = buffer.size();
        buffer.append(",\"dur\":");
        AppendMicros(&buffer, xspace::EventDurationNs(event));
        if (event.stats_size() > 0) {
          buffer.append(",\"args\":{");
          for (int i = 0; i < event.stats_size(); ++i) {
            const XStat& st = event.stats(i);
            if (i > 0) buffer.push_back(',');
            buffer.append(names.StatKey(st.metadata_id()));
            AppendStatValue(&buffer, st, names);
          }
          buffer.push_back('}');
        }
        buffer.push_back('}');
        ++out.events;
        // The flow's end on this slice: same thread, start and category, so Perfetto (the slice
        // open at that instant, the innermost) and Chrome DevTools' trace engine (the slice with
        // the same ts, pid, tid and cat) both bind it here. Each end is written once.
        if (flow_at.has_value()) {
          const bool launch = kind == pod_trace::PlaneKind::kHost;
          (launch ? flows.started : flows.finished)[*flow_at] = 1;
          const std::string ts(buffer, ts_at, ts_end - ts_at);
          begin_event();
          absl::StrAppend(&buffer, "{\"ph\":\"", launch ? "s" : "f",
                          "\",\"name\":\"launch\",\"cat\":\"launch\",\"id\":",
                          host_index << kFlowIdHostShift | static_cast<int64_t>(*flow_at + 1),
                          launch ? "" : ",\"bp\":\"e\"", ",\"pid\":", pid, ",\"tid\":", tid,
                          ",\"ts\":", ts, "}");
          ++out.flow_events;
        }
        // Device memory in use after an allocation or deallocation, as the allocator reported
        // it, on a counter of the GPU's process (of this plane's when the GPU has none).
        if (name.memory) {
          const std::optional<uint64_t> in_use = pod_trace::IntStat(event, in_use_id);
          const std::optional<uint64_t> ordinal = pod_trace::IntStat(event, ordinal_id);
          const std::string allocator =
              absl::AsciiStrToLower(reader.StrStat(event, "allocator_name").value_or(""));
          const bool host_memory =
              absl::StrContains(allocator, "cpu") || absl::StrContains(allocator, "host");
          if (in_use.has_value() && ordinal.has_value() && !host_memory &&
              static_cast<int64_t>(*ordinal) >= 0) {
            const auto device = static_cast<int64_t>(*ordinal);
            auto gpu = flows.gpu_plane.find(device);
            begin_event();
            absl::StrAppend(
                &buffer, "{\"ph\":\"C\",\"name\":\"GPU ", device, " memory in use\",\"pid\":",
                gpu == flows.gpu_plane.end() ? pid : host_index * kPidsPerHost + 1 + gpu->second,
                ",\"ts\":");
            append_ts(start_ns);
            absl::StrAppend(&buffer, ",\"args\":{\"bytes\":", static_cast<int64_t>(*in_use), "}}");
            ++out.counter_events;
          }
        }
        flush(kFlushBytes);
      }
    }
    // A GPU's derived tracks (Steps, TensorFlow Ops, XLA Ops), when its writer wrote none.
    if (!absl::StartsWith(plane.name(), xspace::kGpuPlanePrefix)) continue;
    if (!derived.has_value()) derived.emplace(space);
    for (const xspace::DerivedLine& line : derived->Derive(plane)) {
      // The id's 32 bits as an unsigned number: a positive tid for every viewer.
      const int64_t tid = static_cast<uint32_t>(line.id);
      begin_event();
      absl::StrAppend(&buffer, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":{\"name\":");
      AppendJsonString(&buffer, line.name);
      buffer.append("}}");
      for (const xspace::DerivedEvent& e : line.events) {
        begin_event();
        buffer.append("{\"ph\":\"X\",\"name\":");
        AppendJsonString(&buffer, e.name);
        absl::StrAppend(&buffer, ",\"cat\":\"derived\",\"pid\":", pid, ",\"tid\":", tid,
                        ",\"ts\":");
        append_ts(e.start_ns);
        buffer.append(",\"dur\":");
        AppendMicros(&buffer, e.end_ns - e.start_ns);
        if (e.step.has_value()) absl::StrAppend(&buffer, ",\"args\":{\"step_num\":", *e.step, "}");
        buffer.push_back('}');
        ++out.derived_events;
        flush(kFlushBytes);
      }
    }
  }
  flush(0);
  absl::StatusOr<DeflatedPiece> piece = deflater.Take();
  if (!piece.ok()) {
    return absl::Status(piece.status().code(),
                        absl::StrCat("pod trace: host ", host, ": ", piece.status().message()));
  }
  out.piece = *std::move(piece);
  return out;
}

absl::Status PodTraceWriter::Usable() const {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " is already finished"));
  }
  return absl::OkStatus();
}

absl::Status PodTraceWriter::HostsOpen() const {
  if (pod_steps_ < 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("pod trace ", out_.path(), ": no host can be added after the pod's step track"));
}

absl::Status PodTraceWriter::AddHost(absl::string_view host, const XSpace& space,
                                     int64_t offset_ns) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (absl::Status s = HostsOpen(); !s.ok()) return s;
  absl::StatusOr<RenderedHost> rendered = Render(host, space, offset_ns, base_ns_, hosts_, level_);
  if (!rendered.ok()) return error_ = rendered.status();
  return AddRendered(*rendered);
}

absl::Status PodTraceWriter::AddRendered(const RenderedHost& rendered) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (absl::Status s = HostsOpen(); !s.ok()) return s;
  if (rendered.host_index != hosts_ || rendered.base_ns != base_ns_) {
    return error_ = absl::InvalidArgumentError(
               absl::StrCat("pod trace ", out_.path(), ": host ", hosts_,
                            " expected, got one rendered as host ", rendered.host_index,
                            " with base ", rendered.base_ns, " (the writer's is ", base_ns_, ")"));
  }
  if (rendered.piece.size > 0) {
    if (!first_event_) error_ = out_.Append(",\n");
    if (error_.ok()) error_ = out_.AppendDeflated(rendered.piece);
    if (!error_.ok()) return error_;
    first_event_ = false;
  }
  events_ += rendered.events;
  flow_events_ += rendered.flow_events;
  counter_events_ += rendered.counter_events;
  derived_events_ += rendered.derived_events;
  ++hosts_;
  return absl::OkStatus();
}

absl::Status PodTraceWriter::Append(absl::string_view events) {
  if (!first_event_) error_ = out_.Append(",\n");
  if (error_.ok()) error_ = out_.Append(events);
  first_event_ = false;
  return error_;
}

absl::Status PodTraceWriter::AddPodSteps(const analysis::PodBreakdown& breakdown) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (pod_steps_ >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " already has the pod's step track"));
  }
  pod_steps_ = 0;
  const int64_t pid = hosts_ * kPidsPerHost + 1;
  std::string buffer = absl::StrCat(
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
      ",\"args\":{\"name\":\"pod\"}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", pid,
      ",\"args\":{\"sort_index\":-1}},\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
      ",\"tid\":1,\"args\":{\"name\":\"steps\"}}");
  for (const analysis::PodStep& step : breakdown.steps) {
    if (step.hosts.empty()) continue;
    int64_t start = std::numeric_limits<int64_t>::max();
    int64_t end = std::numeric_limits<int64_t>::min();
    for (const analysis::PodHostStep& h : step.hosts) {
      start = std::min(start, h.start_ns);
      end = std::max(end, SaturatingDiff(h.start_ns, -h.step_time_ns, 0));
    }
    if (!buffer.empty()) buffer.append(",\n");
    absl::StrAppend(&buffer, "{\"ph\":\"X\",\"name\":\"step ", step.step, "\",\"pid\":", pid,
                    ",\"tid\":1,\"ts\":");
    AppendMicros(&buffer, SaturatingDiff(start, base_ns_, 0));
    buffer.append(",\"dur\":");
    AppendMicros(&buffer, SaturatingDiff(end, start, 0));
    absl::StrAppend(
        &buffer, ",\"args\":{\"step\":", step.step, ",\"pod_step_time_ns\":", step.pod_step_time_ns,
        ",\"spread_ns\":", step.spread_ns, ",\"hosts\":", step.hosts.size(),
        ",\"on_every_host\":", step.on_every_host ? "true" : "false", ",\"straggler\":");
    AppendJsonString(&buffer, step.straggler);
    buffer.append("}}");
    ++pod_steps_;
    if (buffer.size() >= kFlushBytes) {
      if (absl::Status s = Append(buffer); !s.ok()) return s;
      buffer.clear();
    }
  }
  if (buffer.empty()) return absl::OkStatus();
  return Append(buffer);
}

absl::Status PodTraceWriter::Finish() {
  if (absl::Status s = Usable(); !s.ok()) return s;
  finished_ = true;
  error_ = out_.Append("\n]}\n");
  if (error_.ok()) error_ = out_.Finish();
  return error_;
}

}  // namespace profctl::report
