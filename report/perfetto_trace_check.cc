#include "report/perfetto_trace_check.h"

#include <climits>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "perfetto/pod_trace.pb.h"

namespace profctl::report {
namespace {

namespace pb = ::profctl::perfetto;

constexpr uint32_t kBoottime = 6;
constexpr uint32_t kRealtime = 1;
constexpr uint32_t kSeqCleared = 1;
constexpr uint32_t kSeqNeeds = 2;
constexpr int kTypeSliceBegin = 1;
constexpr int kTypeSliceEnd = 2;
constexpr int kTypeCounter = 4;

bool SequenceScoped(uint32_t clock) { return clock >= 64 && clock < 128; }

struct Sequence {
  bool valid = false;  // incremental state cleared at least once
  std::optional<pb::TracePacketDefaults> defaults;
  bool snapshot = false;
  bool incremental = false;
  int64_t clock_at_snapshot = 0;  // the sequence's clock
  int64_t trace_at_snapshot = 0;  // the trace's clock then
  int64_t last = 0;               // the sequence clock's last absolute value
  std::map<uint64_t, std::string> event_names, annotation_names, strings;
};

struct Track {
  PerfettoTrackInfo info;
  std::vector<size_t> open;  // slices, innermost last
  int64_t last_ts = std::numeric_limits<int64_t>::min();
};

class Reader {
 public:
  absl::StatusOr<PerfettoTraceModel> Read(absl::string_view bytes) && {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(INT_MAX);
    for (;;) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) break;
      if (tag != ((1u << 3) | 2u)) return Loss("a field other than Trace.packet");
      uint32_t length = 0;
      std::string packet_bytes;
      if (!in.ReadVarint32(&length) || !in.ReadString(&packet_bytes, static_cast<int>(length))) {
        return Loss("a truncated packet");
      }
      pb::TracePacket packet;
      if (!packet.ParseFromString(packet_bytes)) return Loss("a packet that does not parse");
      if (absl::Status s = Packet(packet); !s.ok()) return s;
      ++model_.packets;
    }
    if (!in.ConsumedEntireMessage()) return Loss("bytes after the last packet");
    for (const auto& [uuid, track] : tracks_) {
      if (!track.open.empty()) {
        return Broken(absl::StrCat("track ", uuid, " (", track.info.name, ") ends with ",
                                   track.open.size(), " slices open"));
      }
      model_.tracks[uuid] = track.info;
    }
    for (const auto& [id, ends] : flows_) {
      if (ends.first != 1 || ends.second != 1) {
        return Broken(absl::StrCat("flow ", id, " starts on ", ends.first,
                                   " slices and terminates on ", ends.second, " (1 and 1)"));
      }
    }
    std::map<std::pair<uint64_t, uint64_t>, const PerfettoTrackInfo*> groups;
    for (const auto& [uuid, track] : model_.tracks) {
      if (!track.merged_by_key) continue;
      auto [it, inserted] = groups.try_emplace({track.parent, track.merge_key}, &track);
      if (!inserted && (it->second->name != track.name || it->second->rank != track.rank)) {
        return Broken(absl::StrCat("tracks ", it->second->uuid, " and ", uuid,
                                   " merge by key but differ in name or rank"));
      }
    }
    model_.sequences = static_cast<int64_t>(sequences_.size());
    return std::move(model_);
  }

 private:
  absl::Status Loss(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("not a Perfetto trace: ", what, " at packet ", model_.packets));
  }
  absl::Status Broken(absl::string_view rule) const {
    return absl::FailedPreconditionError(absl::StrCat("packet ", model_.packets, ": ", rule));
  }

  absl::Status Packet(const pb::TracePacket& p) {
    const uint32_t seq_id = p.trusted_packet_sequence_id();
    Sequence* seq = p.has_trusted_packet_sequence_id() ? &sequences_[seq_id] : nullptr;
    if (p.has_clock_snapshot()) return Snapshot(p.clock_snapshot(), seq);
    if (p.has_trace_packet_defaults() || p.has_interned_data() ||
        (p.sequence_flags() & (kSeqCleared | kSeqNeeds)) != 0) {
      if (seq == nullptr || seq_id == 0) return Broken("incremental state without a sequence id");
    }
    if ((p.sequence_flags() & kSeqCleared) != 0) {
      // The clock is not incremental state: it stays.
      seq->valid = true;
      seq->defaults.reset();
      seq->event_names.clear();
      seq->annotation_names.clear();
      seq->strings.clear();
    }
    if (p.has_trace_packet_defaults()) {
      if (!seq->valid) return Broken("TracePacketDefaults before the incremental state is cleared");
      seq->defaults = p.trace_packet_defaults();
    }
    if (p.has_interned_data()) {
      if (!seq->valid) return Broken("interned data before the incremental state is cleared");
      if (absl::Status s = Intern(p.interned_data(), *seq); !s.ok()) return s;
    }
    if (p.has_track_descriptor()) return Descriptor(p.track_descriptor());
    if (p.has_track_event()) return Event(p, seq);
    return absl::OkStatus();
  }

  absl::Status Snapshot(const pb::ClockSnapshot& s, Sequence* seq) {
    std::optional<int64_t> trace;
    std::optional<pb::ClockSnapshot::Clock> scoped;
    for (const pb::ClockSnapshot::Clock& c : s.clocks()) {
      if (c.clock_id() == kBoottime || c.clock_id() == kRealtime) {
        if (c.clock_id() == kBoottime || !trace.has_value()) {
          trace = static_cast<int64_t>(c.timestamp());
        }
      } else if (SequenceScoped(c.clock_id())) {
        if (seq == nullptr) return Broken("a sequence-scoped clock snapshotted without a sequence");
        scoped = c;
      } else {
        return Broken(absl::StrCat("clock ", c.clock_id(),
                                   " is neither BOOTTIME, REALTIME nor "
                                   "sequence-scoped"));
      }
    }
    if (!trace.has_value()) return Broken("a clock snapshot without the trace's clock");
    if (s.has_primary_trace_clock() && s.primary_trace_clock() != kBoottime) {
      return Broken("the primary trace clock is not BOOTTIME");
    }
    if (!scoped.has_value()) {
      if (!head_) model_.base_ns = *trace;
      head_ = true;
      return absl::OkStatus();
    }
    seq->snapshot = true;
    seq->incremental = scoped->is_incremental();
    seq->clock_at_snapshot = static_cast<int64_t>(scoped->timestamp());
    seq->trace_at_snapshot = *trace;
    seq->last = seq->clock_at_snapshot;
    return absl::OkStatus();
  }

  template <typename Entry>
  absl::Status Define(std::map<uint64_t, std::string>& table, const Entry& e,
                      const std::string& text) {
    if (e.iid() == 0) return Broken("interning id 0");
    auto [it, inserted] = table.try_emplace(e.iid(), text);
    if (!inserted && it->second != text) {
      return Broken(absl::StrCat("interning id ", e.iid(), " redefined"));
    }
    return absl::OkStatus();
  }

  absl::Status Intern(const pb::InternedData& d, Sequence& seq) {
    for (const pb::EventName& e : d.event_names()) {
      if (absl::Status s = Define(seq.event_names, e, e.name()); !s.ok()) return s;
    }
    for (const pb::DebugAnnotationName& e : d.debug_annotation_names()) {
      if (absl::Status s = Define(seq.annotation_names, e, e.name()); !s.ok()) return s;
    }
    for (const pb::InternedString& e : d.debug_annotation_string_values()) {
      if (absl::Status s = Define(seq.strings, e, e.str()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Descriptor(const pb::TrackDescriptor& d) {
    if (!d.has_uuid()) return Broken("a track without a uuid");
    if (d.uuid() == 0) {
      model_.processes_in_order = d.process_ordering() == 1;
      return absl::OkStatus();
    }
    if (tracks_.contains(d.uuid()))
      return Broken(absl::StrCat("track ", d.uuid(), " described twice"));
    Track t;
    t.info.uuid = d.uuid();
    t.info.parent = d.parent_uuid();
    t.info.rank = d.sibling_order_rank();
    t.info.counter = d.has_counter();
    t.info.children_in_order = d.child_ordering() == 3;
    t.info.merged_by_key = d.sibling_merge_behavior() == 3;
    t.info.merge_key = d.sibling_merge_key_int();
    if (d.has_process()) {
      if (!d.process().has_pid()) return Broken("a process track without a pid");
      if (!pids_.insert(d.process().pid()).second) {
        return Broken(absl::StrCat("pid ", d.process().pid(), " described twice"));
      }
      t.info.pid = d.process().pid();
      t.info.name = d.process().process_name();
    } else {
      if (d.parent_uuid() == 0) return Broken(absl::StrCat("track ", d.uuid(), " has no parent"));
      t.info.name = d.name();
    }
    if (d.parent_uuid() != 0 && !tracks_.contains(d.parent_uuid())) {
      return Broken(absl::StrCat("track ", d.uuid(), "'s parent ", d.parent_uuid(),
                                 " is not described before it"));
    }
    tracks_.emplace(d.uuid(), std::move(t));
    return absl::OkStatus();
  }

  std::string ProcessOf(uint64_t uuid) const {
    for (int hops = 0; hops < 16; ++hops) {
      auto it = tracks_.find(uuid);
      if (it == tracks_.end()) return "";
      if (it->second.info.pid >= 0) return it->second.info.name;
      uuid = it->second.info.parent;
    }
    return "";
  }

  absl::StatusOr<std::string> Lookup(const std::map<uint64_t, std::string>& table, uint64_t iid,
                                     absl::string_view what) const {
    auto it = table.find(iid);
    if (it == table.end()) {
      return Broken(absl::StrCat(what, " interning id ", iid, " is not defined on its sequence"));
    }
    return it->second;
  }

  absl::Status Event(const pb::TracePacket& p, Sequence* seq) {
    const pb::TrackEvent& e = p.track_event();
    const bool uses_state = (seq != nullptr && seq->defaults.has_value()) || e.has_name_iid();
    if (uses_state) {
      if (!seq->valid)
        return Broken("an event that needs incremental state on an invalid sequence");
      if ((p.sequence_flags() & kSeqNeeds) == 0) {
        return Broken("an event that uses incremental state without SEQ_NEEDS_INCREMENTAL_STATE");
      }
    }
    if (!p.has_timestamp()) return Broken("an event without a timestamp");
    const uint32_t clock =
        seq != nullptr && seq->defaults.has_value() ? seq->defaults->timestamp_clock_id() : 0;
    int64_t ts = static_cast<int64_t>(p.timestamp());
    if (SequenceScoped(clock)) {
      if (!seq->snapshot) {
        return Broken(absl::StrCat("clock ", clock, " used before its sequence snapshotted it"));
      }
      const int64_t abs = seq->incremental ? seq->last + ts : ts;
      seq->last = abs;
      ts = seq->trace_at_snapshot + (abs - seq->clock_at_snapshot);
    } else if (clock != 0 && clock != kBoottime) {
      return Broken(absl::StrCat("events on clock ", clock));
    }
    uint64_t uuid = e.track_uuid();
    if (!e.has_track_uuid() && seq != nullptr && seq->defaults.has_value()) {
      uuid = seq->defaults->track_event_defaults().track_uuid();
    }
    auto track_it = tracks_.find(uuid);
    if (track_it == tracks_.end()) {
      return Broken(absl::StrCat("an event on track ", uuid, ", not described before it"));
    }
    Track& track = track_it->second;
    if (ts < track.last_ts) {
      return Broken(
          absl::StrCat("track ", uuid, " goes back in time (", ts, " after ", track.last_ts, ")"));
    }
    track.last_ts = ts;
    if (e.type() == kTypeCounter) {
      if (!track.info.counter) return Broken("a counter sample on a slice track");
      model_.counters.push_back({ProcessOf(uuid), track.info.name, ts, e.counter_value()});
      return absl::OkStatus();
    }
    if (track.info.counter) return Broken("a slice on a counter track");
    if (e.type() == kTypeSliceEnd) {
      if (track.open.empty())
        return Broken(absl::StrCat("an END on track ", uuid, " with no slice open"));
      model_.slices[track.open.back()].end_ns = ts;
      track.open.pop_back();
      return absl::OkStatus();
    }
    if (e.type() != kTypeSliceBegin) return Broken(absl::StrCat("an event of type ", e.type()));
    PerfettoSliceInfo slice;
    slice.process = ProcessOf(uuid);
    slice.track = track.info.name;
    slice.track_uuid = uuid;
    slice.start_ns = ts;
    slice.end_ns = ts;
    slice.depth = static_cast<int>(track.open.size());
    if (e.has_name_iid()) {
      absl::StatusOr<std::string> name = Lookup(seq->event_names, e.name_iid(), "event name");
      if (!name.ok()) return name.status();
      slice.name = *std::move(name);
    } else {
      slice.name = e.name();
    }
    for (const pb::DebugAnnotation& a : e.debug_annotations()) {
      std::string key = a.name();
      if (a.has_name_iid()) {
        if (seq == nullptr) return Broken("an interned annotation name without a sequence");
        absl::StatusOr<std::string> k =
            Lookup(seq->annotation_names, a.name_iid(), "annotation name");
        if (!k.ok()) return k.status();
        key = *std::move(k);
      }
      std::string value;
      if (a.has_bool_value()) {
        value = a.bool_value() ? "true" : "false";
      } else if (a.has_uint_value()) {
        value = absl::StrCat(a.uint_value());
      } else if (a.has_int_value()) {
        value = absl::StrCat(a.int_value());
      } else if (a.has_double_value()) {
        value = absl::StrFormat("%.17g", a.double_value());
      } else if (a.has_string_value()) {
        value = a.string_value();
      } else if (a.has_string_value_iid()) {
        if (seq == nullptr) return Broken("an interned string without a sequence");
        absl::StatusOr<std::string> v = Lookup(seq->strings, a.string_value_iid(), "string");
        if (!v.ok()) return v.status();
        value = *std::move(v);
      }
      slice.args[key] = std::move(value);
    }
    for (uint64_t id : e.flow_ids()) {
      slice.flows_out.push_back(id);
      ++flows_[id].first;
    }
    for (uint64_t id : e.terminating_flow_ids()) {
      slice.flows_in.push_back(id);
      ++flows_[id].second;
    }
    track.open.push_back(model_.slices.size());
    model_.slices.push_back(std::move(slice));
    return absl::OkStatus();
  }

  PerfettoTraceModel model_;
  bool head_ = false;
  absl::flat_hash_map<uint32_t, Sequence> sequences_;
  std::map<uint64_t, Track> tracks_;
  std::set<int64_t> pids_;
  std::map<uint64_t, std::pair<int, int>> flows_;  // id -> (starts, terminations)
};

}  // namespace

absl::StatusOr<PerfettoTraceModel> ReadPerfettoTrace(absl::string_view trace) {
  if (trace.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("a Perfetto trace over 2 GiB");
  }
  return Reader().Read(trace);
}

}  // namespace profctl::report
