#include "coordinator/report/pod_trace_writer.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/xspace.h"

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

absl::StatusOr<PodTraceWriter> PodTraceWriter::Open(const std::string& path, int64_t base_ns) {
  absl::StatusOr<GzipFileWriter> out = GzipFileWriter::Open(path);
  if (!out.ok()) return out.status();
  PodTraceWriter w(*std::move(out), base_ns);
  absl::StrAppend(&w.buffer_,
                  "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"base_time_ns\":", base_ns,
                  ",\"producer\":\"profctl\"},\"traceEvents\":[\n");
  return w;
}

void PodTraceWriter::BeginEvent() {
  if (!first_event_) buffer_.append(",\n");
  first_event_ = false;
}

absl::Status PodTraceWriter::Flush(size_t threshold) {
  if (buffer_.size() < threshold) return absl::OkStatus();
  error_ = out_.Append(buffer_);
  buffer_.clear();
  return error_;
}

absl::Status PodTraceWriter::AddHost(absl::string_view host, const XSpace& space,
                                     int64_t offset_ns) {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " is already finished"));
  }
  const int64_t profile_start = xspace::ProfileStartNs(space);
  for (const XPlane& plane : space.planes()) {
    if (plane.lines_size() == 0) continue;
    const int64_t pid = next_pid_++;
    BeginEvent();
    absl::StrAppend(&buffer_, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
                    ",\"args\":{\"name\":");
    AppendJsonString(&buffer_, absl::StrCat(host, " ", plane.name()));
    buffer_.append("}}");
    BeginEvent();
    absl::StrAppend(&buffer_, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", pid,
                    ",\"args\":{\"sort_index\":", pid, "}}");
    const xspace::XPlaneReader reader(plane);
    for (const XLine& line : plane.lines()) {
      const int64_t tid = line.display_id() != 0 ? line.display_id() : line.id();
      BeginEvent();
      absl::StrAppend(&buffer_, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":{\"name\":");
      AppendJsonString(&buffer_, line.display_name().empty() ? line.name() : line.display_name());
      buffer_.append("}}");
      for (const XEvent& event : line.events()) {
        if (event.data_case() == XEvent::kNumOccurrences) continue;
        BeginEvent();
        buffer_.append("{\"ph\":\"X\",\"name\":");
        AppendJsonString(&buffer_, reader.EventName(event));
        absl::StrAppend(&buffer_, ",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":");
        AppendMicros(&buffer_, SaturatingDiff(xspace::EventStartNs(profile_start, line, event),
                                              offset_ns, base_ns_));
        buffer_.append(",\"dur\":");
        AppendMicros(&buffer_, xspace::EventDurationNs(event));
        if (event.stats_size() > 0) {
          buffer_.append(",\"args\":{");
          for (int i = 0; i < event.stats_size(); ++i) {
            const XStat& s = event.stats(i);
            auto md = plane.stat_metadata().find(s.metadata_id());
            if (i > 0) buffer_.push_back(',');
            AppendJsonString(&buffer_, md == plane.stat_metadata().end()
                                           ? absl::StrCat("stat_", s.metadata_id())
                                           : md->second.name());
            buffer_.push_back(':');
            AppendStatValue(&buffer_, s, plane);
          }
          buffer_.push_back('}');
        }
        buffer_.push_back('}');
        ++events_;
        if (absl::Status s = Flush(kFlushBytes); !s.ok()) return s;
      }
    }
    if (absl::Status s = Flush(kFlushBytes); !s.ok()) return s;
  }
  ++hosts_;
  return absl::OkStatus();
}

absl::Status PodTraceWriter::Finish() {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " is already finished"));
  }
  finished_ = true;
  buffer_.append("\n]}\n");
  if (absl::Status s = Flush(/*threshold=*/0); !s.ok()) return s;
  error_ = out_.Finish();
  return error_;
}

}  // namespace profctl::report
