#include "agent/collectors/cupti/cupti_collector.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/collectors/cupti/record_batch.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "xspace/xspace.h"
#include "xspace/xspace_merge.h"

namespace profctl::agent::cupti {
namespace {

using tensorflow::profiler::XSpace;

std::string Who(const InjectProcess& p) {
  std::string who = absl::StrCat("cupti pid ", p.pid);
  if (p.rank >= 0) absl::StrAppend(&who, " (rank ", p.rank, ")");
  return who;
}

// One CUDA_VISIBLE_DEVICES entry, resolved as far as `host` allows.
struct VisibleEntry {
  std::string text;
  std::optional<uint32_t> host_index;
  bool is_uuid = false;  // "GPU-..." or "MIG-...": a warning when it cannot be placed
};

// The entries of `visible_devices`; empty when the list is empty or holds anything that is not an
// index or a UUID (CUDA itself stops at the first invalid entry: guessing is worse than leaving).
std::vector<VisibleEntry> ParseVisibleDevices(absl::string_view visible_devices,
                                              const HostGpuTable& host) {
  std::vector<VisibleEntry> entries;
  if (absl::StripAsciiWhitespace(visible_devices).empty()) return entries;
  for (absl::string_view item : absl::StrSplit(visible_devices, ',')) {
    item = absl::StripAsciiWhitespace(item);
    VisibleEntry e;
    e.text = std::string(item);
    uint32_t index = 0;
    if (!item.empty() && absl::ascii_isdigit(static_cast<unsigned char>(item[0])) &&
        absl::SimpleAtoi(item, &index)) {
      e.host_index = index;
    } else if (absl::StartsWithIgnoreCase(item, "GPU-")) {
      e.is_uuid = true;
      if (std::optional<int> i = host.FindUuidPrefix(item)) e.host_index = *i;
    } else if (absl::StartsWithIgnoreCase(item, "MIG-")) {
      e.is_uuid = true;
      // "MIG-GPU-<parent uuid>/<gi>/<ci>" names its GPU; "MIG-<uuid>" does not.
      absl::string_view rest = item.substr(4);
      if (absl::StartsWithIgnoreCase(rest, "GPU-")) {
        rest = rest.substr(0, rest.find('/'));
        if (std::optional<GpuUuid> parent = ParseGpuUuid(rest)) {
          if (std::optional<int> i = host.FindUuid(*parent)) e.host_index = *i;
        }
      }
    } else {
      return {};  // garbage, "-1", an empty entry: keep the ordinals
    }
    entries.push_back(e);
  }
  return entries;
}

// Calls f with every device id of `batch` (a RecordBatch, const or not).
template <typename Batch, typename F>
void ForEachDeviceId(Batch& batch, F f) {
  for (auto& r : batch.kernels) f(r.device_id);
  for (auto& r : batch.memcpys) f(r.device_id);
  for (auto& r : batch.memsets) f(r.device_id);
  for (auto& r : batch.memory) f(r.device_id);
  for (auto& r : batch.devices) f(r.device_id);
}

GpuUuid ToUuid(const uint8_t (&bytes)[16]) {
  GpuUuid uuid;
  std::copy(std::begin(bytes), std::end(bytes), uuid.begin());
  return uuid;
}

}  // namespace

ProcessDeviceMap MapProcessDevices(absl::string_view visible_devices,
                                   const std::vector<RecordBatch>& batches,
                                   const HostGpuTable& host) {
  ProcessDeviceMap map;
  // The ordinals used, and the device record of each (the first one: they are replayed).
  std::map<uint32_t, const inject::DeviceRecord*> ordinals;
  for (const RecordBatch& b : batches) {
    for (const inject::DeviceRecord& d : b.devices) {
      const inject::DeviceRecord*& slot = ordinals[d.device_id];
      if (slot == nullptr) slot = &d;
    }
    ForEachDeviceId(b, [&ordinals](uint32_t id) { ordinals.try_emplace(id, nullptr); });
  }
  const std::vector<VisibleEntry> visible = ParseVisibleDevices(visible_devices, host);
  for (const auto& [ordinal, device] : ordinals) {
    const bool has_uuid = device != nullptr && (device->flags & inject::kDeviceHasUuid) != 0;
    const bool is_mig = device != nullptr && (device->flags & inject::kDeviceIsMig) != 0;
    if (has_uuid) {
      if (std::optional<int> i = host.FindUuid(ToUuid(device->uuid))) {
        map.host_index[ordinal] = static_cast<uint32_t>(*i);
        continue;
      }
    }
    const VisibleEntry* entry = ordinal < visible.size() ? &visible[ordinal] : nullptr;
    if (entry != nullptr && entry->host_index) {
      map.host_index[ordinal] = *entry->host_index;
      continue;
    }
    const bool from_record = (has_uuid || is_mig) && !host.empty();
    const bool from_visible = entry != nullptr && entry->is_uuid;
    if (!from_record && !from_visible) continue;
    std::string name;  // the device's own UUID, else the process's name for it
    if (from_record && is_mig) {
      name = FormatGpuUuid("MIG-", ToUuid(device->mig_uuid));
    } else if (from_record) {
      name = FormatGpuUuid("GPU-", ToUuid(device->uuid));
    } else {
      name = entry->text;
    }
    map.warnings.push_back(absl::StrCat("device ", ordinal, " (UUID ", name,
                                        ") is not a GPU of this host's table; its plane keeps "
                                        "the process's ordinal"));
  }
  return map;
}

void ApplyDeviceMap(const ProcessDeviceMap& map, RecordBatch* batch) {
  if (map.host_index.empty()) return;
  ForEachDeviceId(*batch, [&map](uint32_t& id) {
    if (auto it = map.host_index.find(id); it != map.host_index.end()) id = it->second;
  });
}

void RemapVisibleDevices(absl::string_view visible_devices, RecordBatch* batch) {
  std::vector<RecordBatch> one(1);
  one[0] = *batch;
  ApplyDeviceMap(MapProcessDevices(visible_devices, one, HostGpuTable()), batch);
}

CuptiCollector::CuptiCollector(InjectServer* server, CuptiCollectorOptions options,
                               const Clock* clock)
    : server_(server), options_(std::move(options)), clock_(clock) {}

absl::Status CuptiCollector::Prepare(const CaptureOptions& options) {
  running_ = stopped_ = false;
  start_ns_ = stop_ns_ = 0;
  if (server_ == nullptr) return absl::FailedPreconditionError("cupti: no inject server");
  const int64_t planned_start =
      options.start_wall_ns != 0 ? options.start_wall_ns : clock_->WallNs();
  const int64_t start_real =
      options.start_wall_ns != 0 ? options.start_wall_ns - options_.clock_skew_ns : 0;
  const int64_t end_real = planned_start + options.duration_ns +
                           options_.end_slack_ms * kNanosPerMilli - options_.clock_skew_ns;
  token_ = server_->OpenWindow(options.session_id, start_real, end_real);
  return absl::OkStatus();
}

absl::Status CuptiCollector::Start(int64_t wall_ns) {
  start_ns_ = wall_ns;
  running_ = true;
  return absl::OkStatus();
}

absl::Status CuptiCollector::Stop(int64_t wall_ns) {
  if (!running_) return absl::FailedPreconditionError("cupti collector: Stop before Start");
  stop_ns_ = wall_ns;
  running_ = false;
  stopped_ = true;
  server_->CloseWindow(token_);
  return absl::OkStatus();
}

void CuptiCollector::Abort() {
  if (server_ != nullptr && token_ != 0) server_->AbortWindow(token_);
  token_ = 0;
}

const HostGpuTable& CuptiCollector::HostGpus() {
  if (!host_gpus_ || host_gpus_->empty()) {
    absl::StatusOr<HostGpuTable> table = ReadHostGpus(options_.nvidia_gpus_dir);
    if (!table.ok() && !host_gpus_) {
      spdlog::info("cupti: no host GPU table ({}); devices are placed by CUDA_VISIBLE_DEVICES",
                   std::string(table.status().message()));
    }
    host_gpus_ = table.ok() ? *std::move(table) : HostGpuTable();
  }
  return *host_gpus_;
}

void CuptiCollector::RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                                 std::vector<StepSample>* out) const {
  if (server_ == nullptr || max == 0) return;
  // Agent wall = CLOCK_REALTIME + skew.
  const int64_t skew = options_.clock_skew_ns;
  // Saturating: a caller's "since the beginning of time" stays so.
  auto to_realtime = [skew](int64_t wall) {
    int64_t r = 0;
    if (__builtin_sub_overflow(wall, skew, &r)) return skew > 0 ? INT64_MIN : INT64_MAX;
    return r;
  };
  std::vector<InjectStepSample> samples;
  server_->RecentSteps(to_realtime(since_wall_ns), to_realtime(now_wall_ns), max, &samples);
  out->reserve(out->size() + samples.size());
  for (InjectStepSample& s : samples) {
    StepSample step;
    step.end_wall_ns = s.end_realtime_ns + skew;
    step.duration_ns = s.end_realtime_ns - s.start_realtime_ns;
    step.step_num = s.step_num;
    step.source = std::move(s.source);
    out->push_back(std::move(step));
  }
}

absl::Status CuptiCollector::Collect(XSpace* space) {
  if (!stopped_ || stop_ns_ < start_ns_) {
    return absl::FailedPreconditionError("cupti collector: Collect before Stop");
  }
  stopped_ = false;
  SetShortfalls({});
  std::vector<InjectWindowResult> results =
      server_->TakeWindow(token_, absl::Milliseconds(options_.flush_timeout_ms));
  token_ = 0;
  xspace::SetProfileWindow(space, start_ns_, stop_ns_);
  if (results.empty()) {
    space->add_warnings(
        absl::StrCat("cupti: no CUDA process is connected to ", server_->socket_path(),
                     " (run it with CUDA_INJECTION64_PATH=/path/to/libprofctl_inject.so)"));
    return absl::OkStatus();
  }
  std::vector<RecordBatch> batches;
  // Record bytes held: raw batches still to parse plus parsed ones.
  last_collect_ = {};
  for (const InjectWindowResult& r : results) {
    for (const std::string& bytes : r.batches) {
      last_collect_.received_bytes += static_cast<int64_t>(bytes.size());
    }
  }
  int64_t held = last_collect_.received_bytes;
  last_collect_.peak_record_bytes = held;
  // What the window lacks, over every process: for the header (TakeShortfalls).
  uint64_t dropped_batch_bytes = 0, dropped_records = 0;
  int dropped_batch_procs = 0, dropped_record_procs = 0;
  for (InjectWindowResult& r : results) {
    const std::string who = Who(r.process);
    for (const std::string& e : r.errors) space->add_errors(absl::StrCat(who, ": ", e));
    int bad = 0;
    uint64_t dropped = r.dropped_records;
    std::vector<RecordBatch> own;
    own.reserve(r.batches.size());
    for (std::string& bytes : r.batches) {
      absl::StatusOr<RecordBatch> batch = ParseRecordBatch(bytes);
      if (batch.ok()) held += HeldBytes(*batch);
      last_collect_.peak_record_bytes = std::max(last_collect_.peak_record_bytes, held);
      // The bytes go as soon as they are parsed: raw and parsed copies of the whole window are
      // never held together.
      held -= static_cast<int64_t>(bytes.size());
      std::string().swap(bytes);
      if (!batch.ok()) {
        if (bad++ == 0) {
          space->add_errors(
              absl::StrCat(who, ": unusable record batch: ", batch.status().message()));
        }
        continue;
      }
      dropped += batch->dropped_records;
      // The process measured GPU - CLOCK_REALTIME; the window is on the agent's clock.
      batch->gpu_minus_wall_ns -= options_.clock_skew_ns;
      own.push_back(*std::move(batch));
    }
    if (!own.empty()) {
      // Device ids: the process's CUDA ordinals -> the host's indices.
      const ProcessDeviceMap map = MapProcessDevices(r.process.visible_devices, own, HostGpus());
      for (const std::string& w : map.warnings) space->add_warnings(absl::StrCat(who, ": ", w));
      for (RecordBatch& b : own) {
        ApplyDeviceMap(map, &b);
        batches.push_back(std::move(b));
      }
    }
    std::vector<std::string>().swap(r.batches);
    if (bad > 1) space->add_errors(absl::StrCat(who, ": ", bad, " unusable record batches"));
    if (dropped > 0) {
      space->add_warnings(
          absl::StrCat(who, ": ", dropped, " GPU activity records were dropped (buffers full)"));
      dropped_records += dropped;
      ++dropped_record_procs;
    }
    if (r.dropped_bytes > 0) {
      dropped_batch_bytes += static_cast<uint64_t>(r.dropped_bytes);
      ++dropped_batch_procs;
    }
    if (!r.enabled && r.errors.empty()) {
      space->add_errors(absl::StrCat(who, ": never started recording"));
    }
  }
  std::vector<profctl::v1::Shortfall> found;
  if (dropped_batch_bytes > 0) {
    found.push_back(MakeShortfall(
        profctl::v1::SHORTFALL_KIND_DROPPED_RECORD_BATCHES, dropped_batch_bytes,
        absl::StrCat(dropped_batch_bytes, " bytes of CUDA record batches from ",
                     dropped_batch_procs, " process(es) dropped over the window's byte caps (",
                     server_->options().max_client_window_bytes >> 20, " MiB per process, ",
                     server_->options().max_window_bytes >> 20,
                     " MiB per window; profctl-agent --max-held-mb raises them)")));
  }
  if (dropped_records > 0) {
    found.push_back(
        MakeShortfall(profctl::v1::SHORTFALL_KIND_DROPPED_RECORDS, dropped_records,
                      absl::StrCat(dropped_records, " GPU activity records dropped by CUPTI in ",
                                   dropped_record_procs, " process(es) (its buffers were full)")));
  }
  if (batches.empty()) {
    SetShortfalls(std::move(found));
    return absl::OkStatus();
  }
  CuptiXSpaceOptions build;
  build.hostname = options_.hostname;
  build.profile_start_ns = start_ns_;
  build.profile_stop_ns = stop_ns_ > start_ns_ ? stop_ns_ : start_ns_ + 1;
  build.step_pattern = options_.step_pattern;
  XSpace built;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace(batches, build, &built);
  // The records are in the planes now: freed before the planes are merged and serialized.
  std::vector<RecordBatch>().swap(batches);
  if (!stats.ok()) {
    SetShortfalls(std::move(found));
    return stats.status();
  }
  if (UnrecordedLaunchesAreAShortfall(*stats)) {
    found.push_back(MakeShortfall(
        profctl::v1::SHORTFALL_KIND_UNLAUNCHED_WORK,
        static_cast<uint64_t>(stats->unrecorded_launches),
        absl::StrCat(stats->unrecorded_launches,
                     " kernels, copies and memsets inside the window without a recorded launch "
                     "(their API records were lost), left out: they could not be placed in a "
                     "step")));
  }
  SetShortfalls(std::move(found));
  for (tensorflow::profiler::XPlane& plane : *built.mutable_planes()) {
    if (plane.name() == xspace::kTaskEnvPlaneName) continue;
    xspace::AddOrMergePlane(&plane, space);
  }
  for (const std::string& e : built.errors()) space->add_errors(absl::StrCat("cupti: ", e));
  for (const std::string& w : built.warnings()) space->add_warnings(absl::StrCat("cupti: ", w));
  spdlog::info(
      "cupti: {} processes, {} bytes received (at most {} record bytes held at once), {} kernels, "
      "{} memcpys, {} API calls, {} NVTX ranges ({} steps), "
      "{} synchronizations ({} without their API call), {} records outside the window, {} "
      "left out with their launch",
      results.size(), last_collect_.received_bytes, last_collect_.peak_record_bytes, stats->kernels,
      stats->memcpys, stats->api_calls, stats->nvtx_ranges, stats->steps, stats->synchronizations,
      stats->unmatched_synchronizations, stats->outside_window, stats->launched_outside);
  return absl::OkStatus();
}

absl::Status CuptiCollector::StartRecorder(const RecorderLimits& limits, int64_t now_wall_ns) {
  if (limits.keep_ns <= 0 || limits.max_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("cupti flight recorder: keep ", limits.keep_ns,
                                                   " ns and ", limits.max_bytes,
                                                   " bytes must both be positive"));
  }
  if (server_ == nullptr) {
    return absl::UnimplementedError("cupti flight recorder: no inject server, no past to keep");
  }
  {
    absl::MutexLock lock(&recorder_mu_);
    ring_ = std::make_unique<FlightRing<RecordedEvent>>(limits.keep_ns, limits.max_bytes);
    recorder_start_ns_ = now_wall_ns;
    pulled_until_ns_ = now_wall_ns;
    recent_keys_.clear();
  }
  // The processes keep their NCCL launches from now on (and those that connect later), unless
  // the agent leaves their CUPTI subscription to a framework profiler.
  if (options_.recorder_launches) server_->SetCollectiveLaunches(true);
  return absl::OkStatus();
}

bool CuptiCollector::Recording() const {
  absl::MutexLock lock(&recorder_mu_);
  return ring_ != nullptr;
}

void CuptiCollector::RecordUntil(int64_t now_wall_ns) {
  absl::MutexLock lock(&recorder_mu_);
  if (ring_ == nullptr || now_wall_ns <= pulled_until_ns_) return;
  // Steps that ended and launches made since the last pull, and those of the kLateStepNs before
  // it that reached the server since (the recent keys say which were recorded). Those before the
  // recorder started are not its past.
  const int64_t since = std::max(recorder_start_ns_, pulled_until_ns_ - kLateStepNs);
  const int64_t skew = options_.clock_skew_ns;
  std::vector<InjectStepSample> raw;
  server_->RecentSteps(since - skew, now_wall_ns - skew, std::numeric_limits<size_t>::max(), &raw);
  std::vector<InjectCollectiveLaunch> launches;
  server_->RecentLaunches(since - skew, now_wall_ns - skew, &launches);
  std::vector<RecordedEvent> events;
  events.reserve(raw.size() + launches.size());
  for (const InjectStepSample& s : raw) {
    events.push_back({.pid = s.pid,
                      .tid = 0,
                      .start_wall_ns = s.start_realtime_ns + skew,
                      .end_wall_ns = s.end_realtime_ns + skew,
                      .number = s.step_num,
                      .kernel_name = nullptr});
  }
  for (InjectCollectiveLaunch& l : launches) {
    events.push_back({.pid = l.pid,
                      .tid = l.tid,
                      .start_wall_ns = l.realtime_ns + skew,
                      .end_wall_ns = l.realtime_ns + skew,
                      .number = static_cast<int64_t>(l.seq),
                      .kernel_name = std::move(l.kernel_name)});
  }
  // The ring takes records in order of their ends.
  std::stable_sort(
      events.begin(), events.end(),
      [](const RecordedEvent& a, const RecordedEvent& b) { return a.end_wall_ns < b.end_wall_ns; });
  for (RecordedEvent& e : events) {
    const EventKey key{e.end_wall_ns, e.pid, e.kernel_name != nullptr, e.number};
    if (!recent_keys_.insert(key).second) continue;
    const int64_t start = e.start_wall_ns;
    const int64_t end = e.end_wall_ns;
    ring_->Push(start, end, sizeof(RecordedEvent), std::move(e));
  }
  pulled_until_ns_ = now_wall_ns;
  const EventKey oldest{pulled_until_ns_ - kLateStepNs, 0, false, INT64_MIN};
  recent_keys_.erase(recent_keys_.begin(), recent_keys_.lower_bound(oldest));
}

void CuptiCollector::SetShortfalls(std::vector<profctl::v1::Shortfall> found) {
  absl::MutexLock lock(&shortfalls_mu_);
  shortfalls_ = std::move(found);
}

void CuptiCollector::TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) {
  absl::MutexLock lock(&shortfalls_mu_);
  for (profctl::v1::Shortfall& s : shortfalls_) out->push_back(std::move(s));
  shortfalls_.clear();
}

absl::Status CuptiCollector::Snapshot(int64_t from_wall_ns, int64_t to_wall_ns, XSpace* space) {
  SetShortfalls({});
  if (to_wall_ns <= from_wall_ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("cupti snapshot: empty window ", from_wall_ns, "..", to_wall_ns, " ns"));
  }
  // The processes send their steps about once a second: ask for what they hold now, so the last
  // second before the snapshot's instant is in it (docs/flight-recorder.md, "Freshness"), then
  // pull up to now (steps that ended by to_wall_ns but arrived late are the kLateStepNs kind).
  // The wait holds this (collect) executor at most snapshot_pending_wait_ms, as TakeWindow's
  // flush wait does.
  const int64_t wait_ms = options_.snapshot_pending_wait_ms;
  const size_t silent = wait_ms > 0 ? server_->RequestPending(absl::Milliseconds(wait_ms)) : 0;
  RecordUntil(std::max(to_wall_ns, clock_->WallNs()));
  std::vector<RecordedEvent> events;
  int64_t since = 0;
  {
    absl::MutexLock lock(&recorder_mu_);
    if (ring_ == nullptr) {
      return absl::FailedPreconditionError("cupti: the flight recorder is not running");
    }
    events = ring_->Between(from_wall_ns, to_wall_ns);
    // The past held starts at the recorder's start, or at the oldest step kept once the bounds
    // dropped some.
    const FlightRingStats held = ring_->stats();
    since = recorder_start_ns_;
    if (held.evicted > 0) since = held.records > 0 ? held.oldest_start_ns : to_wall_ns;
  }
  xspace::SetProfileWindow(space, from_wall_ns, to_wall_ns);
  space->add_warnings(
      "cupti: the flight recorder keeps the NVTX step ranges and NCCL kernel launches of each "
      "CUDA process only (no other kernels, no copies, API calls or completion times: those are "
      "recorded by a capture)");
  if (silent > 0) {
    space->add_warnings(absl::StrCat(
        "cupti: ", silent, " CUDA process(es) did not send their latest steps within ", wait_ms,
        " ms of the snapshot (a library older than this agent, or a stalled process): up to the "
        "last second before its instant may be missing from them"));
  }
  if (const uint64_t lost = server_->collective_launches_dropped(); lost > 0) {
    space->add_warnings(absl::StrCat(
        "cupti: the CUDA processes lost ", lost,
        " NCCL launches since the agent started (their rings were full between sends)"));
  }
  if (since > from_wall_ns) {
    SetShortfalls({ShortRecorderShortfall(from_wall_ns, to_wall_ns, since)});
    space->add_warnings(absl::StrCat(
        "flight recorder: the cupti collector holds the last ",
        (to_wall_ns - since) / kNanosPerMilli, " ms only, of ",
        (to_wall_ns - from_wall_ns) / kNanosPerMilli,
        " ms asked (it started recording then, or its --flight-recorder bounds dropped the rest)"));
  }
  if (events.empty()) return absl::OkStatus();
  CuptiXSpaceOptions build;
  // One batch per process: its step ranges as NVTX ranges named "step <n>" on its main thread
  // line, on the agent's clock (gpu_minus_wall_ns 0), built as a capture builds them.
  std::map<uint32_t, RecordBatch> by_pid;
  std::set<uint32_t> pids;
  for (const RecordedEvent& step : events) {
    pids.insert(step.pid);
    if (step.kernel_name != nullptr) {
      build.collective_launches.push_back({.pid = step.pid,
                                           .tid = step.tid,
                                           .wall_ns = step.start_wall_ns,
                                           .seq = static_cast<uint64_t>(step.number),
                                           .kernel_name = step.kernel_name});
      continue;
    }
    RecordBatch& b = by_pid[step.pid];
    if (b.strings.empty()) b.pid = step.pid;
    inject::NvtxRangeRecord r;
    r.start_ns = static_cast<uint64_t>(step.start_wall_ns);
    r.end_ns = static_cast<uint64_t>(step.end_wall_ns);
    r.pid = step.pid;
    r.tid = step.pid;
    r.name = static_cast<uint32_t>(b.strings.size());
    r.id = static_cast<uint32_t>(b.ranges.size());
    b.strings.push_back(absl::StrCat("step ", step.number));
    b.ranges.push_back(r);
  }
  std::vector<RecordBatch> batches;
  batches.reserve(by_pid.size());
  for (auto& [pid, b] : by_pid) batches.push_back(std::move(b));
  build.hostname = options_.hostname;
  build.profile_start_ns = from_wall_ns;
  build.profile_stop_ns = to_wall_ns;
  // The names are ours ("step <n>"), whatever the processes' step pattern.
  build.step_pattern = std::string(kDefaultNvtxStepPattern);
  XSpace built;
  PROFCTL_ASSIGN_OR_RETURN(CuptiXSpaceStats stats, BuildCuptiXSpace(batches, build, &built));
  for (tensorflow::profiler::XPlane& plane : *built.mutable_planes()) {
    if (plane.name() == xspace::kTaskEnvPlaneName) continue;
    xspace::AddOrMergePlane(&plane, space);
  }
  for (const std::string& e : built.errors()) space->add_errors(absl::StrCat("cupti: ", e));
  for (const std::string& w : built.warnings()) space->add_warnings(absl::StrCat("cupti: ", w));
  spdlog::info("cupti snapshot: {} steps and {} NCCL launches of {} processes", stats.steps,
               stats.collective_launches, pids.size());
  return absl::OkStatus();
}

RecorderStats CuptiCollector::recorder_stats() const {
  absl::MutexLock lock(&recorder_mu_);
  if (ring_ == nullptr) return {};
  const FlightRingStats s = ring_->stats();
  return {
      .records = s.records, .bytes = s.bytes, .evicted = s.evicted, .since_ns = s.oldest_start_ns};
}

}  // namespace profctl::agent::cupti
