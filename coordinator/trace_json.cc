#include "coordinator/trace_json.h"

#include "absl/strings/str_cat.h"
#include "common/json_util.h"
#include "common/xspace.h"

namespace profctl::coordinator {
namespace {

using tensorflow::profiler::XStat;

// Microseconds with three decimals, from integer nanoseconds (exact, no floating point).
void AppendMicros(std::string* out, int64_t ns) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  absl::StrAppend(out, ns / 1000);
  const int64_t frac = ns % 1000;
  if (frac != 0) {
    char buf[5] = {'.', static_cast<char>('0' + frac / 100),
                   static_cast<char>('0' + frac / 10 % 10), static_cast<char>('0' + frac % 10), 0};
    out->append(buf);
  }
}

void AppendStatValue(std::string* out, const XStat& s, const tensorflow::profiler::XPlane& plane) {
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

std::string PodTraceJson(const std::vector<HostTrace>& hosts, int64_t base_ns) {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"base_time_ns\":";
  absl::StrAppend(&out, base_ns, ",\"producer\":\"profctl\"},\"traceEvents\":[\n");
  bool first = true;
  auto begin_event = [&] {
    if (!first) out.append(",\n");
    first = false;
  };
  int pid = 0;
  for (const HostTrace& host : hosts) {
    for (const auto& plane : host.space->planes()) {
      if (plane.lines_size() == 0) continue;
      ++pid;
      begin_event();
      absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", pid,
                      ",\"args\":{\"name\":");
      AppendJsonString(&out, absl::StrCat(host.host, " ", plane.name()));
      out.append("}}");
      begin_event();
      absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", pid,
                      ",\"args\":{\"sort_index\":", pid, "}}");
      const xspace::XPlaneReader reader(plane);
      for (const auto& line : plane.lines()) {
        const int64_t tid = line.display_id() != 0 ? line.display_id() : line.id();
        begin_event();
        absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid,
                        ",\"tid\":", tid, ",\"args\":{\"name\":");
        AppendJsonString(&out, line.display_name().empty() ? line.name() : line.display_name());
        out.append("}}");
        for (const auto& event : line.events()) {
          if (event.data_case() == tensorflow::profiler::XEvent::kNumOccurrences) continue;
          begin_event();
          out.append("{\"ph\":\"X\",\"name\":");
          AppendJsonString(&out, reader.EventName(event));
          absl::StrAppend(&out, ",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":");
          AppendMicros(&out, xspace::EventStartNs(line, event) - host.offset_ns - base_ns);
          out.append(",\"dur\":");
          AppendMicros(&out, xspace::EventDurationNs(event));
          if (event.stats_size() > 0) {
            out.append(",\"args\":{");
            for (int i = 0; i < event.stats_size(); ++i) {
              const XStat& s = event.stats(i);
              auto md = plane.stat_metadata().find(s.metadata_id());
              if (i > 0) out.push_back(',');
              AppendJsonString(&out, md == plane.stat_metadata().end()
                                         ? absl::StrCat("stat_", s.metadata_id())
                                         : md->second.name());
              out.push_back(':');
              AppendStatValue(&out, s, plane);
            }
            out.push_back('}');
          }
          out.push_back('}');
        }
      }
    }
  }
  out.append("\n]}\n");
  return out;
}

}  // namespace profctl::coordinator
