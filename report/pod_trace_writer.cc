#include "report/pod_trace_writer.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
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

void AppendStatValue(std::string* out, const XStat& s, const XPlane& plane) {
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
    case XStat::kRefValue: {
      auto it = plane.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
      AppendJsonString(out, it == plane.stat_metadata().end() ? "" : it->second.name());
      break;
    }
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
    for (const XLine& line : plane.lines()) {
      const int64_t tid = line.display_id() != 0 ? line.display_id() : line.id();
      begin_event();
      absl::StrAppend(&buffer, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":{\"name\":");
      AppendJsonString(&buffer, line.display_name().empty() ? line.name() : line.display_name());
      buffer.append("}}");
      for (const XEvent& event : line.events()) {
        if (event.data_case() == XEvent::kNumOccurrences) continue;
        begin_event();
        buffer.append("{\"ph\":\"X\",\"name\":");
        AppendJsonString(&buffer, reader.EventName(event));
        absl::StrAppend(&buffer, ",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":");
        AppendMicros(&buffer, SaturatingDiff(xspace::EventStartNs(profile_start, line, event),
                                             offset_ns, base_ns));
        buffer.append(",\"dur\":");
        AppendMicros(&buffer, xspace::EventDurationNs(event));
        if (event.stats_size() > 0) {
          buffer.append(",\"args\":{");
          for (int i = 0; i < event.stats_size(); ++i) {
            const XStat& st = event.stats(i);
            auto md = plane.stat_metadata().find(st.metadata_id());
            if (i > 0) buffer.push_back(',');
            AppendJsonString(&buffer, md == plane.stat_metadata().end()
                                          ? absl::StrCat("stat_", st.metadata_id())
                                          : md->second.name());
            buffer.push_back(':');
            AppendStatValue(&buffer, st, plane);
          }
          buffer.push_back('}');
        }
        buffer.push_back('}');
        ++out.events;
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

absl::Status PodTraceWriter::AddHost(absl::string_view host, const XSpace& space,
                                     int64_t offset_ns) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  absl::StatusOr<RenderedHost> rendered = Render(host, space, offset_ns, base_ns_, hosts_, level_);
  if (!rendered.ok()) return error_ = rendered.status();
  return AddRendered(*rendered);
}

absl::Status PodTraceWriter::AddRendered(const RenderedHost& rendered) {
  if (absl::Status s = Usable(); !s.ok()) return s;
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
  ++hosts_;
  return absl::OkStatus();
}

absl::Status PodTraceWriter::Finish() {
  if (absl::Status s = Usable(); !s.ok()) return s;
  finished_ = true;
  error_ = out_.Append("\n]}\n");
  if (error_.ok()) error_ = out_.Finish();
  return error_;
}

}  // namespace profctl::report
