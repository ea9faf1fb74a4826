#include "report/pod_perfetto_trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "report/pod_trace_flows.h"
#include "report/proto_wire.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

namespace profctl::report {
namespace {

using proto_wire::AppendBytesField;
using proto_wire::AppendDoubleField;
using proto_wire::AppendFixed64Field;
using proto_wire::AppendVarintField;
using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

// Field numbers of Perfetto's trace protos (protos/perfetto/trace/), the subset written here.
constexpr uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr uint32_t kPacketClockSnapshot = 6;
constexpr uint32_t kPacketTimestamp = 8;
constexpr uint32_t kPacketSequenceId = 10;  // trusted_packet_sequence_id
constexpr uint32_t kPacketTrackEvent = 11;
constexpr uint32_t kPacketInternedData = 12;
constexpr uint32_t kPacketSequenceFlags = 13;
constexpr uint32_t kPacketDefaults = 59;  // trace_packet_defaults
constexpr uint32_t kPacketTrackDescriptor = 60;
constexpr uint32_t kPacketFirstOnSequence = 87;  // first_packet_on_sequence
constexpr uint64_t kSeqIncrementalStateCleared = 1;
constexpr uint64_t kSeqNeedsIncrementalState = 2;
// TracePacketDefaults, TrackEventDefaults
constexpr uint32_t kDefaultsTimestampClockId = 58;
constexpr uint32_t kDefaultsTrackEvent = 11;
constexpr uint32_t kTrackEventDefaultsTrackUuid = 11;
// ClockSnapshot, ClockSnapshot.Clock
constexpr uint32_t kSnapshotClocks = 1;
constexpr uint32_t kSnapshotPrimaryTraceClock = 2;
constexpr uint32_t kClockId = 1;
constexpr uint32_t kClockTimestamp = 2;
constexpr uint32_t kClockIsIncremental = 3;
constexpr uint64_t kClockRealtime = 1;
constexpr uint64_t kClockBoottime = 6;
constexpr uint64_t kHostClock = 64;  // sequence-scoped (64..127)
// TrackDescriptor, ProcessDescriptor, CounterDescriptor
constexpr uint32_t kTrackUuid = 1;
constexpr uint32_t kTrackName = 2;
constexpr uint32_t kTrackProcess = 3;
constexpr uint32_t kTrackParentUuid = 5;
constexpr uint32_t kTrackCounter = 8;
constexpr uint32_t kTrackChildOrdering = 11;
constexpr uint32_t kTrackSiblingOrderRank = 12;
constexpr uint32_t kTrackSiblingMergeBehavior = 15;
constexpr uint32_t kTrackSiblingMergeKeyInt = 17;
constexpr uint32_t kTrackProcessOrdering = 19;
constexpr uint64_t kChildOrderingExplicit = 3;
constexpr uint64_t kMergeBySiblingMergeKey = 3;
constexpr uint64_t kProcessOrderingExplicit = 1;
constexpr uint32_t kProcessPid = 1;
constexpr uint32_t kProcessName = 6;
constexpr uint32_t kCounterUnit = 3;
constexpr uint64_t kUnitSizeBytes = 3;
// TrackEvent
constexpr uint32_t kEventDebugAnnotations = 4;
constexpr uint32_t kEventType = 9;
constexpr uint32_t kEventNameIid = 10;
constexpr uint32_t kEventTrackUuid = 11;
constexpr uint32_t kEventName = 23;
constexpr uint32_t kEventCounterValue = 30;
constexpr uint32_t kEventFlowIds = 47;             // fixed64, repeated, not packed
constexpr uint32_t kEventTerminatingFlowIds = 48;  // the same
constexpr uint64_t kSliceBegin = 1;
constexpr uint64_t kSliceEnd = 2;
constexpr uint64_t kCounter = 4;
// DebugAnnotation
constexpr uint32_t kAnnotationNameIid = 1;
constexpr uint32_t kAnnotationBool = 2;
constexpr uint32_t kAnnotationUint = 3;
constexpr uint32_t kAnnotationInt = 4;
constexpr uint32_t kAnnotationDouble = 5;
constexpr uint32_t kAnnotationString = 6;
constexpr uint32_t kAnnotationName = 10;
constexpr uint32_t kAnnotationStringIid = 17;
// InternedData and its entries (EventName, DebugAnnotationName, InternedString: iid 1, text 2)
constexpr uint32_t kInternedEventNames = 2;
constexpr uint32_t kInternedAnnotationNames = 3;
constexpr uint32_t kInternedStrings = 29;  // debug_annotation_string_values
constexpr uint32_t kInternedIid = 1;
constexpr uint32_t kInternedText = 2;

constexpr size_t kPacketFlushBytes = 64 << 10;
constexpr int64_t kMaxLocalSequences = 0xffff;
constexpr uint64_t kFirstLaneTrack = PodPerfettoWriter::kPlanesPerHost;

int64_t SaturatingAdd(int64_t a, int64_t b) {
  const __int128 v = static_cast<__int128>(a) + b;
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

uint64_t TrackUuid(int64_t host_index, uint64_t local) {
  return (static_cast<uint64_t>(host_index + 1) << 32) | local;
}

uint32_t SequenceId(int64_t host_index, int64_t local) {
  return static_cast<uint32_t>((static_cast<uint64_t>(host_index) << 16) |
                               static_cast<uint64_t>(local));
}

// One packet of a Trace: its bytes as Trace.packet.
void AppendPacket(std::string* out, absl::string_view packet) {
  AppendBytesField(out, kTracePacket, packet);
}

void AppendProcessTrack(std::string* out, uint64_t uuid, int64_t pid, absl::string_view name,
                        int64_t rank) {
  std::string process;
  AppendVarintField(&process, kProcessPid, static_cast<uint64_t>(pid));
  AppendBytesField(&process, kProcessName, name);
  std::string track;
  AppendVarintField(&track, kTrackUuid, uuid);
  AppendBytesField(&track, kTrackProcess, process);
  AppendVarintField(&track, kTrackSiblingOrderRank, static_cast<uint64_t>(rank));
  AppendVarintField(&track, kTrackChildOrdering, kChildOrderingExplicit);
  std::string packet;
  AppendBytesField(&packet, kPacketTrackDescriptor, track);
  AppendPacket(out, packet);
}

// A child track of a process: one lane of a line (lanes of one line share `rank`, which is also
// their merge key, and their name).
void AppendLaneTrack(std::string* out, uint64_t uuid, uint64_t parent, absl::string_view name,
                     int64_t rank) {
  std::string track;
  AppendVarintField(&track, kTrackUuid, uuid);
  AppendVarintField(&track, kTrackParentUuid, parent);
  AppendBytesField(&track, kTrackName, name);
  AppendVarintField(&track, kTrackSiblingOrderRank, static_cast<uint64_t>(rank));
  AppendVarintField(&track, kTrackSiblingMergeBehavior, kMergeBySiblingMergeKey);
  AppendVarintField(&track, kTrackSiblingMergeKeyInt, static_cast<uint64_t>(rank));
  std::string packet;
  AppendBytesField(&packet, kPacketTrackDescriptor, track);
  AppendPacket(out, packet);
}

// A slice to be: [start, end] and which event of its source it is.
struct Slice {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t index = 0;
};

// Start order; at equal starts the longer first, so a parent opens before its children.
bool SliceBefore(const Slice& a, const Slice& b) {
  if (a.start != b.start) return a.start < b.start;
  if (a.end != b.end) return a.end > b.end;
  return a.index < b.index;
}

// Places sorted `slices` in lanes where each nests: a slice goes to the first lane whose open
// slices (those not ended at its start) all hold it; a new lane when none does, up to
// `max_lanes` (-1: it fits none). Returns the lane of each slice and sets *lanes.
std::vector<int16_t> AssignLanes(const std::vector<Slice>& slices, int64_t max_lanes,
                                 int64_t* lanes) {
  std::vector<int16_t> lane_of(slices.size(), -1);
  std::vector<std::vector<int64_t>> open;  // per lane, the ends of its open slices
  for (size_t i = 0; i < slices.size(); ++i) {
    const Slice& s = slices[i];
    size_t lane = 0;
    for (; lane < open.size(); ++lane) {
      std::vector<int64_t>& ends = open[lane];
      while (!ends.empty() && ends.back() <= s.start) ends.pop_back();
      if (ends.empty() || ends.back() >= s.end) break;
    }
    if (lane == open.size()) {
      if (static_cast<int64_t>(open.size()) >= max_lanes) continue;
      open.emplace_back();
    }
    open[lane].push_back(s.end);
    lane_of[i] = static_cast<int16_t>(lane);
  }
  *lanes = static_cast<int64_t>(open.size());
  return lane_of;
}

// One packet sequence on the host's incremental clock, its track the default: interning and the
// delta-coded time are per sequence.
class Lane {
 public:
  Lane(uint32_t sequence, uint64_t track) : sequence_(sequence), track_(track) {
    AppendVarintField(&sequence_field_, kPacketSequenceId, sequence);
  }

  // The interning id of the value that `key` names in `table` (event names, annotation names or
  // strings), adding `text` as its InternedData entry the first time it is asked for.
  template <typename Key, typename TextFn>
  uint64_t Intern(absl::flat_hash_map<Key, uint64_t>& table, uint32_t field, const Key& key,
                  TextFn&& text) {
    auto [it, inserted] = table.try_emplace(key, table.size() + 1);
    if (inserted) {
      std::string entry;
      AppendVarintField(&entry, kInternedIid, it->second);
      AppendBytesField(&entry, kInternedText, text());
      AppendBytesField(&interned_, field, entry);
    }
    return it->second;
  }
  absl::flat_hash_map<int64_t, uint64_t>& event_names() { return event_names_; }
  absl::flat_hash_map<absl::string_view, uint64_t>& text_names() { return text_names_; }
  absl::flat_hash_map<int64_t, uint64_t>& keys() { return keys_; }
  absl::flat_hash_map<absl::string_view, uint64_t>& strings() { return strings_; }

  // Appends one packet at `ts_ns` (host clock, never before the previous packet) with
  // `track_event` as its TrackEvent and the interned data gathered since the last packet.
  // `scratch`: reused for the packet's bytes.
  void AppendEventPacket(std::string* out, int64_t ts_ns, absl::string_view track_event,
                         std::string* scratch,
                         std::vector<PerfettoHostFragment::Sequence>* sequences) {
    std::string& p = *scratch;
    p.clear();
    uint64_t delta = 0;
    if (first_) {
      sequences->push_back({sequence_, ts_ns});
    } else if (ts_ns > last_ns_) {
      delta = static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(last_ns_);
    }
    AppendVarintField(&p, kPacketTimestamp, delta);
    p.append(sequence_field_);
    if (first_) {
      AppendVarintField(&p, kPacketSequenceFlags,
                        kSeqIncrementalStateCleared | kSeqNeedsIncrementalState);
      std::string track_defaults;
      AppendVarintField(&track_defaults, kTrackEventDefaultsTrackUuid, track_);
      std::string defaults;
      AppendVarintField(&defaults, kDefaultsTimestampClockId, kHostClock);
      AppendBytesField(&defaults, kDefaultsTrackEvent, track_defaults);
      AppendBytesField(&p, kPacketDefaults, defaults);
    } else {
      AppendVarintField(&p, kPacketSequenceFlags, kSeqNeedsIncrementalState);
    }
    AppendBytesField(&p, kPacketTrackEvent, track_event);
    if (!interned_.empty()) {
      AppendBytesField(&p, kPacketInternedData, interned_);
      interned_.clear();
    }
    AppendPacket(out, p);
    first_ = false;
    last_ns_ = std::max(last_ns_, ts_ns);
  }

 private:
  uint32_t sequence_;
  uint64_t track_;
  std::string sequence_field_;
  bool first_ = true;
  int64_t last_ns_ = std::numeric_limits<int64_t>::min();
  absl::flat_hash_map<int64_t, uint64_t> event_names_;  // by event metadata id
  absl::flat_hash_map<absl::string_view, uint64_t> text_names_;
  absl::flat_hash_map<int64_t, uint64_t> keys_;  // by stat metadata id
  // String values (a str stat's, a ref's stat metadata name), by their text: they outlive the
  // lane (the host's XSpace).
  absl::flat_hash_map<absl::string_view, uint64_t> strings_;
  std::string interned_;  // InternedData fields not yet written
};

class HostRenderer {
 public:
  HostRenderer(absl::string_view host, const XSpace& space, int64_t host_index, int level)
      : host_(host), space_(space), host_index_(host_index), deflater_(level) {
    out_.host_index = host_index;
  }

  absl::StatusOr<PerfettoHostFragment> Render() && {
    flows_ = pod_trace::IndexFlows(space_, PodPerfettoWriter::kPlanesPerHost - 1);
    profile_start_ = xspace::ProfileStartNs(space_);
    // Every process first: a counter may belong to a plane rendered later.
    int64_t number = 0;
    for (const XPlane& plane : space_.planes()) {
      if (plane.lines_size() == 0) continue;
      if (number >= PodPerfettoWriter::kPlanesPerHost - 1) {
        ++out_.planes_skipped;
        continue;
      }
      AppendProcessTrack(&buffer_, ProcessUuid(number), Pid(number),
                         absl::StrCat(host_, " ", plane.name()), Pid(number));
      ++number;
    }
    number = 0;
    for (const XPlane& plane : space_.planes()) {
      if (plane.lines_size() == 0) continue;
      if (number >= PodPerfettoWriter::kPlanesPerHost - 1) break;
      RenderPlane(plane, number++);
    }
    RenderCounters();
    Flush(0);
    absl::StatusOr<DeflatedPiece> piece = deflater_.Take();
    if (!piece.ok()) {
      return absl::Status(piece.status().code(), absl::StrCat("perfetto pod trace: host ", host_,
                                                              ": ", piece.status().message()));
    }
    out_.piece = *std::move(piece);
    return std::move(out_);
  }

 private:
  // What a plane's events need for their flows.
  struct PlaneState {
    const XPlane* plane = nullptr;
    int64_t number = 0;
    pod_trace::PlaneKind kind = pod_trace::PlaneKind::kOther;
    std::optional<int64_t> corr_id;
  };

  int64_t Pid(int64_t plane_number) const {
    return host_index_ * PodPerfettoWriter::kPlanesPerHost + plane_number + 1;
  }
  uint64_t ProcessUuid(int64_t plane_number) const {
    return TrackUuid(host_index_, static_cast<uint64_t>(plane_number) + 1);
  }

  // A new lane with its track descriptor, or nullopt past the host's sequences.
  std::optional<Lane> NewLane(uint64_t parent, absl::string_view name, int64_t rank) {
    if (next_sequence_ > kMaxLocalSequences) return std::nullopt;
    const uint64_t uuid = TrackUuid(host_index_, next_track_++);
    AppendLaneTrack(&buffer_, uuid, parent, name, rank);
    return Lane(SequenceId(host_index_, next_sequence_++), uuid);
  }

  void Flush(size_t threshold) {
    if (buffer_.size() < threshold) return;
    deflater_.Append(buffer_);
    buffer_.clear();
  }

  // Emits `slices` (sorted) whose lane is `lane_no` as BEGIN/END pairs on `lane`; `begin` fills
  // a BEGIN's TrackEvent after its type. Returns how many it emitted.
  template <typename BeginFn>
  int64_t EmitLane(Lane& lane, const std::vector<Slice>& slices,
                   const std::vector<int16_t>& lane_of, int16_t lane_no, BeginFn&& begin) {
    int64_t emitted = 0;
    std::vector<int64_t> open;
    std::string end_event;
    AppendVarintField(&end_event, kEventType, kSliceEnd);
    const auto close_until = [&](int64_t t) {
      while (!open.empty() && open.back() <= t) {
        lane.AppendEventPacket(&buffer_, open.back(), end_event, &packet_, &out_.sequences);
        open.pop_back();
      }
    };
    for (size_t i = 0; i < slices.size(); ++i) {
      if (lane_of[i] != lane_no) continue;
      const Slice& s = slices[i];
      close_until(s.start);
      event_.clear();
      AppendVarintField(&event_, kEventType, kSliceBegin);
      begin(lane, s);
      lane.AppendEventPacket(&buffer_, s.start, event_, &packet_, &out_.sequences);
      open.push_back(s.end);
      ++emitted;
      Flush(kPacketFlushBytes);
    }
    close_until(std::numeric_limits<int64_t>::max());
    Flush(kPacketFlushBytes);
    return emitted;
  }

  // Sorts `slices`, places them in lanes and renders each lane as a track of the plane's process
  // named `name`; `begin` fills each BEGIN. Returns the slices rendered.
  template <typename BeginFn>
  int64_t RenderSlices(std::vector<Slice>& slices, int64_t plane_number, absl::string_view name,
                       int64_t rank, BeginFn&& begin) {
    if (!std::is_sorted(slices.begin(), slices.end(), SliceBefore)) {
      std::sort(slices.begin(), slices.end(), SliceBefore);
    }
    int64_t lanes = 0;
    const std::vector<int16_t> lane_of = AssignLanes(slices, PodPerfettoWriter::kMaxLanes, &lanes);
    lanes = std::max<int64_t>(lanes, 1);  // an empty line is still shown
    out_.lanes += lanes - 1;
    int64_t rendered = 0;
    for (int64_t k = 0; k < lanes; ++k) {
      std::optional<Lane> lane = NewLane(ProcessUuid(plane_number), name, rank);
      if (!lane.has_value()) break;
      rendered += EmitLane(*lane, slices, lane_of, static_cast<int16_t>(k), begin);
    }
    out_.events_skipped += static_cast<int64_t>(slices.size()) - rendered;
    return rendered;
  }

  // The annotation name `stat_id`'s (its stat metadata's name, "stat_<id>" without one).
  uint64_t KeyIid(Lane& lane, const XPlane& plane, int64_t stat_id) {
    return lane.Intern(lane.keys(), kInternedAnnotationNames, stat_id, [&]() -> std::string {
      auto md = plane.stat_metadata().find(stat_id);
      return md == plane.stat_metadata().end() ? absl::StrCat("stat_", stat_id) : md->second.name();
    });
  }

  // A string value interned on the lane's sequence: a str stat's values repeat (kernel details,
  // op names), and the interned text is written once per sequence.
  static uint64_t StringIid(Lane& lane, absl::string_view text) {
    return lane.Intern(lane.strings(), kInternedStrings, text, [&] { return std::string(text); });
  }

  void AppendAnnotation(Lane& lane, const XPlane& plane, const XStat& s) {
    annotation_.clear();
    AppendVarintField(&annotation_, kAnnotationNameIid, KeyIid(lane, plane, s.metadata_id()));
    switch (s.value_case()) {
      case XStat::kDoubleValue:
        AppendDoubleField(&annotation_, kAnnotationDouble, s.double_value());
        break;
      case XStat::kUint64Value:
        AppendVarintField(&annotation_, kAnnotationUint, s.uint64_value());
        break;
      case XStat::kInt64Value:
        AppendVarintField(&annotation_, kAnnotationInt, static_cast<uint64_t>(s.int64_value()));
        break;
      case XStat::kStrValue:
        AppendVarintField(&annotation_, kAnnotationStringIid, StringIid(lane, s.str_value()));
        break;
      case XStat::kBytesValue:
        AppendBytesField(&annotation_, kAnnotationString,
                         absl::StrCat("<", s.bytes_value().size(), " bytes>"));
        break;
      case XStat::kRefValue: {
        auto md = plane.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
        AppendVarintField(&annotation_, kAnnotationStringIid,
                          StringIid(lane, md == plane.stat_metadata().end()
                                              ? absl::string_view()
                                              : absl::string_view(md->second.name())));
        break;
      }
      default:
        return;  // a stat without a value says nothing
    }
    AppendBytesField(&event_, kEventDebugAnnotations, annotation_);
  }

  void RenderPlane(const XPlane& plane, int64_t number) {
    PlaneState ps;
    ps.plane = &plane;
    ps.number = number;
    ps.kind = pod_trace::KindOf(plane);
    const xspace::XPlaneReader reader(plane);
    ps.corr_id = reader.StatId(xspace::kStatCorrelationId);
    const std::optional<int64_t> in_use_id = reader.StatId("bytes_allocated");
    const std::optional<int64_t> ordinal_id = reader.StatId("device_ordinal");
    absl::flat_hash_map<int64_t, bool> memory_event;  // event metadata id -> a memory event
    std::vector<Slice> slices;
    int64_t rank = 0;
    for (const XLine& line : plane.lines()) {
      slices.clear();
      for (int i = 0; i < line.events_size(); ++i) {
        const XEvent& event = line.events(i);
        if (event.data_case() == XEvent::kNumOccurrences) continue;
        const int64_t start = xspace::EventStartNs(profile_start_, line, event);
        slices.push_back({start, SaturatingAdd(start, xspace::EventDurationNs(event)),
                          static_cast<uint32_t>(i)});
        if (in_use_id.has_value() && ordinal_id.has_value()) {
          auto [it, inserted] = memory_event.try_emplace(event.metadata_id(), false);
          if (inserted) {
            auto md = plane.event_metadata().find(event.metadata_id());
            it->second =
                md != plane.event_metadata().end() && (md->second.name() == "MemoryAllocation" ||
                                                       md->second.name() == "MemoryDeallocation");
          }
          if (it->second) AddMemorySample(number, reader, event, start, in_use_id, ordinal_id);
        }
      }
      const std::string& name = line.display_name().empty() ? line.name() : line.display_name();
      out_.events += RenderSlices(slices, number, name, rank++, [&](Lane& lane, const Slice& s) {
        const XEvent& event = line.events(static_cast<int>(s.index));
        const uint64_t name_iid = lane.Intern(
            lane.event_names(), kInternedEventNames, static_cast<int64_t>(event.metadata_id()),
            [&]() -> std::string {
              auto md = plane.event_metadata().find(event.metadata_id());
              return md == plane.event_metadata().end() ? std::string() : md->second.name();
            });
        AppendVarintField(&event_, kEventNameIid, name_iid);
        for (const XStat& st : event.stats()) AppendAnnotation(lane, plane, st);
        AppendFlow(ps, event);
      });
    }
    // A GPU's derived tracks (Steps, TensorFlow Ops, XLA Ops), when its writer wrote none.
    if (!absl::StartsWith(plane.name(), xspace::kGpuPlanePrefix)) return;
    if (!derived_.has_value()) derived_.emplace(space_);
    for (const xspace::DerivedLine& line : derived_->Derive(plane)) {
      slices.clear();
      for (size_t i = 0; i < line.events.size(); ++i) {
        slices.push_back(
            {line.events[i].start_ns, line.events[i].end_ns, static_cast<uint32_t>(i)});
      }
      out_.derived_events +=
          RenderSlices(slices, number, line.name, rank++, [&](Lane& lane, const Slice& s) {
            const xspace::DerivedEvent& e = line.events[s.index];
            AppendVarintField(&event_, kEventNameIid,
                              lane.Intern(lane.text_names(), kInternedEventNames, e.name,
                                          [&] { return std::string(e.name); }));
            if (e.step.has_value()) {
              annotation_.clear();
              AppendVarintField(&annotation_, kAnnotationNameIid,
                                lane.Intern(lane.keys(), kInternedAnnotationNames, int64_t{-1},
                                            [] { return std::string("step_num"); }));
              AppendVarintField(&annotation_, kAnnotationInt, static_cast<uint64_t>(*e.step));
              AppendBytesField(&event_, kEventDebugAnnotations, annotation_);
            }
          });
    }
  }

  // A launch or its device work: the flow's end on this slice, each end written once.
  void AppendFlow(const PlaneState& ps, const XEvent& event) {
    if (ps.kind == pod_trace::PlaneKind::kOther) return;
    const std::optional<uint64_t> corr = pod_trace::IntStat(event, ps.corr_id);
    if (!corr.has_value()) return;
    const std::optional<size_t> at = flows_.Find(*corr);
    if (!at.has_value()) return;
    const bool launch = ps.kind == pod_trace::PlaneKind::kHost;
    uint8_t& written = (launch ? flows_.started : flows_.finished)[*at];
    if (written != 0) return;
    written = 1;
    const uint64_t id =
        (static_cast<uint64_t>(host_index_) << PodPerfettoWriter::kFlowIdHostShift) |
        static_cast<uint64_t>(*at + 1);
    AppendFixed64Field(&event_, launch ? kEventFlowIds : kEventTerminatingFlowIds, id);
    ++out_.flow_ends;
  }

  // Device memory in use after an allocation or deallocation, as the allocator reported it, on a
  // counter of the GPU's process (of this plane's when the GPU has none).
  void AddMemorySample(int64_t number, const xspace::XPlaneReader& reader, const XEvent& event,
                       int64_t start, std::optional<int64_t> in_use_id,
                       std::optional<int64_t> ordinal_id) {
    const std::optional<uint64_t> in_use = pod_trace::IntStat(event, in_use_id);
    const std::optional<uint64_t> ordinal = pod_trace::IntStat(event, ordinal_id);
    if (!in_use.has_value() || !ordinal.has_value() || static_cast<int64_t>(*ordinal) < 0) return;
    const std::string allocator =
        absl::AsciiStrToLower(reader.StrStat(event, "allocator_name").value_or(""));
    if (absl::StrContains(allocator, "cpu") || absl::StrContains(allocator, "host")) return;
    const auto device = static_cast<int64_t>(*ordinal);
    auto gpu = flows_.gpu_plane.find(device);
    const int64_t parent = gpu == flows_.gpu_plane.end() ? number : gpu->second;
    counters_[{parent, device}].push_back({start, static_cast<int64_t>(*in_use)});
  }

  void RenderCounters() {
    for (auto& [key, samples] : counters_) {
      const auto [parent, device] = key;
      std::stable_sort(samples.begin(), samples.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      if (next_sequence_ > kMaxLocalSequences) {
        out_.events_skipped += static_cast<int64_t>(samples.size());
        continue;
      }
      const uint64_t uuid = TrackUuid(host_index_, next_track_++);
      std::string counter;
      AppendVarintField(&counter, kCounterUnit, kUnitSizeBytes);
      std::string track;
      AppendVarintField(&track, kTrackUuid, uuid);
      AppendVarintField(&track, kTrackParentUuid, ProcessUuid(parent));
      AppendBytesField(&track, kTrackName, absl::StrCat("GPU ", device, " memory in use"));
      AppendBytesField(&track, kTrackCounter, counter);
      std::string packet;
      AppendBytesField(&packet, kPacketTrackDescriptor, track);
      AppendPacket(&buffer_, packet);
      Lane lane(SequenceId(host_index_, next_sequence_++), uuid);
      for (const auto& [ts, value] : samples) {
        event_.clear();
        AppendVarintField(&event_, kEventType, kCounter);
        AppendVarintField(&event_, kEventCounterValue, static_cast<uint64_t>(value));
        lane.AppendEventPacket(&buffer_, ts, event_, &packet_, &out_.sequences);
        ++out_.counter_samples;
        Flush(kPacketFlushBytes);
      }
    }
  }

  absl::string_view host_;
  const XSpace& space_;
  int64_t host_index_;
  PieceDeflater deflater_;
  PerfettoHostFragment out_;
  pod_trace::FlowIndex flows_;
  int64_t profile_start_ = 0;
  std::optional<xspace::DerivedLinesBuilder> derived_;  // made at the first GPU plane
  // (parent plane number, device ordinal) -> (time, bytes in use)
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> counters_;
  int64_t next_sequence_ = 1;
  uint64_t next_track_ = kFirstLaneTrack;
  std::string buffer_;      // packets not yet deflated
  std::string packet_;      // scratch: one packet
  std::string event_;       // scratch: one TrackEvent
  std::string annotation_;  // scratch: one DebugAnnotation
};

// The pod's own ids: after every host's.
constexpr int64_t kPodIndex = PodPerfettoWriter::kMaxHosts;

}  // namespace

absl::StatusOr<PerfettoHostFragment> RenderPerfettoHost(absl::string_view host, const XSpace& space,
                                                        int64_t host_index, int level) {
  if (host_index < 0 || host_index >= PodPerfettoWriter::kMaxHosts) {
    return absl::InvalidArgumentError(absl::StrCat("perfetto pod trace: host ", host, ": index ",
                                                   host_index, " is not in [0, ",
                                                   PodPerfettoWriter::kMaxHosts, ")"));
  }
  return HostRenderer(host, space, host_index, level).Render();
}

absl::StatusOr<PodPerfettoWriter> PodPerfettoWriter::Open(const std::string& path, int64_t base_ns,
                                                          int level) {
  absl::StatusOr<GzipFileWriter> out = GzipFileWriter::Open(path, level);
  if (!out.ok()) return out.status();
  PodPerfettoWriter w(*std::move(out));
  // The trace's clock is the coordinator's wall clock, as BOOTTIME (the trace time) and REALTIME.
  std::string snapshot;
  for (const uint64_t clock : {kClockBoottime, kClockRealtime}) {
    std::string c;
    AppendVarintField(&c, kClockId, clock);
    AppendVarintField(&c, kClockTimestamp, static_cast<uint64_t>(base_ns));
    AppendBytesField(&snapshot, kSnapshotClocks, c);
  }
  AppendVarintField(&snapshot, kSnapshotPrimaryTraceClock, kClockBoottime);
  std::string packet;
  AppendBytesField(&packet, kPacketClockSnapshot, snapshot);
  std::string head;
  AppendPacket(&head, packet);
  std::string root;  // the root track (uuid 0): processes in explicit order
  AppendVarintField(&root, kTrackUuid, 0);
  AppendVarintField(&root, kTrackProcessOrdering, kProcessOrderingExplicit);
  packet.clear();
  AppendBytesField(&packet, kPacketTrackDescriptor, root);
  AppendPacket(&head, packet);
  w.error_ = w.out_.Append(head);
  if (!w.error_.ok()) return w.error_;
  return w;
}

absl::Status PodPerfettoWriter::Usable() const {
  if (!error_.ok()) return error_;
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " is already finished"));
  }
  return absl::OkStatus();
}

absl::Status PodPerfettoWriter::AddHost(const PerfettoHostFragment& fragment, int64_t offset_ns) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (pod_steps_ >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pod trace ", out_.path(), ": no host can be added after the pod's step track"));
  }
  if (fragment.host_index < 0 || fragment.host_index >= kMaxHosts ||
      !host_indices_.insert(fragment.host_index).second) {
    return error_ = absl::InvalidArgumentError(
               absl::StrCat("pod trace ", out_.path(), ": a host rendered as index ",
                            fragment.host_index, " is out of range or already added"));
  }
  // Each sequence's clock: the host's clock at its first packet is that instant minus the
  // offset on the coordinator's.
  std::string snapshots;
  std::string clocks, c, packet;
  for (const PerfettoHostFragment::Sequence& seq : fragment.sequences) {
    clocks.clear();
    c.clear();
    AppendVarintField(&c, kClockId, kHostClock);
    AppendVarintField(&c, kClockTimestamp, static_cast<uint64_t>(seq.first_ns));
    AppendVarintField(&c, kClockIsIncremental, 1);
    AppendBytesField(&clocks, kSnapshotClocks, c);
    c.clear();
    AppendVarintField(&c, kClockId, kClockBoottime);
    const __int128 coordinator = static_cast<__int128>(seq.first_ns) - offset_ns;
    AppendVarintField(&c, kClockTimestamp,
                      static_cast<uint64_t>(static_cast<int64_t>(
                          std::clamp<__int128>(coordinator, std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max()))));
    AppendBytesField(&clocks, kSnapshotClocks, c);
    packet.clear();
    AppendVarintField(&packet, kPacketSequenceId, seq.id);
    AppendVarintField(&packet, kPacketFirstOnSequence, 1);
    AppendBytesField(&packet, kPacketClockSnapshot, clocks);
    AppendPacket(&snapshots, packet);
  }
  error_ = out_.Append(snapshots);
  if (error_.ok() && fragment.piece.size > 0) error_ = out_.AppendDeflated(fragment.piece);
  if (!error_.ok()) return error_;
  ++hosts_;
  events_ += fragment.events;
  derived_events_ += fragment.derived_events;
  flow_ends_ += fragment.flow_ends;
  counter_samples_ += fragment.counter_samples;
  return absl::OkStatus();
}

absl::Status PodPerfettoWriter::AddPodSteps(const analysis::PodBreakdown& breakdown) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (pod_steps_ >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod trace ", out_.path(), " already has the pod's step track"));
  }
  pod_steps_ = 0;
  std::string out;
  const uint64_t process = TrackUuid(kPodIndex, 1);
  AppendProcessTrack(&out, process, kPodIndex * kPlanesPerHost + 1, "pod", /*rank=*/-1);
  std::vector<Slice> slices;
  std::vector<const analysis::PodStep*> steps;
  for (const analysis::PodStep& step : breakdown.steps) {
    if (step.hosts.empty()) continue;
    int64_t start = std::numeric_limits<int64_t>::max();
    int64_t end = std::numeric_limits<int64_t>::min();
    for (const analysis::PodHostStep& h : step.hosts) {
      start = std::min(start, h.start_ns);
      end = std::max(end, SaturatingAdd(h.start_ns, h.step_time_ns));
    }
    slices.push_back({start, std::max(start, end), static_cast<uint32_t>(steps.size())});
    steps.push_back(&step);
  }
  std::sort(slices.begin(), slices.end(), SliceBefore);
  int64_t lanes = 0;
  const std::vector<int16_t> lane_of = AssignLanes(slices, kMaxLanes, &lanes);
  // Absolute times on the trace's clock: no incremental state, the track named in each event.
  std::string event, p, annotation;
  const auto append = [&](uint64_t track, int64_t ts, uint64_t type,
                          const analysis::PodStep* step) {
    event.clear();
    AppendVarintField(&event, kEventType, type);
    AppendVarintField(&event, kEventTrackUuid, track);
    if (step != nullptr) {
      AppendBytesField(&event, kEventName, absl::StrCat("step ", step->step));
      const auto add = [&](absl::string_view name, uint32_t field, uint64_t v) {
        annotation.clear();
        AppendBytesField(&annotation, kAnnotationName, name);
        AppendVarintField(&annotation, field, v);
        AppendBytesField(&event, kEventDebugAnnotations, annotation);
      };
      add("step", kAnnotationInt, static_cast<uint64_t>(step->step));
      add("pod_step_time_ns", kAnnotationInt, static_cast<uint64_t>(step->pod_step_time_ns));
      add("spread_ns", kAnnotationInt, static_cast<uint64_t>(step->spread_ns));
      add("hosts", kAnnotationUint, step->hosts.size());
      add("on_every_host", kAnnotationBool, step->on_every_host ? 1 : 0);
      annotation.clear();
      AppendBytesField(&annotation, kAnnotationName, "straggler");
      AppendBytesField(&annotation, kAnnotationString, step->straggler);
      AppendBytesField(&event, kEventDebugAnnotations, annotation);
    }
    p.clear();
    AppendVarintField(&p, kPacketTimestamp, static_cast<uint64_t>(ts));
    AppendVarintField(&p, kPacketSequenceId, SequenceId(kPodIndex, 1));
    AppendBytesField(&p, kPacketTrackEvent, event);
    AppendPacket(&out, p);
  };
  for (int64_t k = 0; k < std::max<int64_t>(lanes, 1); ++k) {
    const uint64_t track = TrackUuid(kPodIndex, kFirstLaneTrack + static_cast<uint64_t>(k));
    AppendLaneTrack(&out, track, process, "steps", 0);
    std::vector<int64_t> open;
    for (size_t i = 0; i < slices.size(); ++i) {
      if (lane_of[i] != k) continue;
      while (!open.empty() && open.back() <= slices[i].start) {
        append(track, open.back(), kSliceEnd, nullptr);
        open.pop_back();
      }
      append(track, slices[i].start, kSliceBegin, steps[slices[i].index]);
      open.push_back(slices[i].end);
      ++pod_steps_;
    }
    for (; !open.empty(); open.pop_back()) append(track, open.back(), kSliceEnd, nullptr);
    if (out.size() >= kPacketFlushBytes) {
      if (error_ = out_.Append(out); !error_.ok()) return error_;
      out.clear();
    }
  }
  error_ = out_.Append(out);
  return error_;
}

absl::Status PodPerfettoWriter::Finish() {
  if (absl::Status s = Usable(); !s.ok()) return s;
  finished_ = true;
  error_ = out_.Finish();
  return error_;
}

}  // namespace profctl::report
