#include "agent/flight_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace profctl::agent {
namespace {

void AddOnce(absl::string_view name, std::vector<std::string>* names) {
  if (std::find(names->begin(), names->end(), name) == names->end()) names->emplace_back(name);
}

}  // namespace

absl::StatusOr<std::shared_ptr<FlightRecorder>> FlightRecorder::Start(
    const std::vector<Target>& targets, Executor* executor, FlightRecorderOptions options) {
  if (options.keep_ms <= 0 || options.max_bytes <= 0 || options.tick_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("flight recorder: keep ", options.keep_ms,
                                                   " ms, ", options.max_bytes, " bytes and tick ",
                                                   options.tick_ms, " ms must all be positive"));
  }
  std::shared_ptr<FlightRecorder> recorder(new FlightRecorder(executor, options));
  // An equal share of the memory for every collector that may record (those that cannot leave
  // theirs unused: the bound stays a bound).
  const int64_t share = std::max<int64_t>(
      1, options.max_bytes / std::max<int64_t>(1, static_cast<int64_t>(targets.size())));
  for (const Target& t : targets) {
    const absl::Status s = t.collector->StartRecorder(
        {.keep_ns = options.keep_ms * kNanosPerMilli, .max_bytes = share}, t.clock->WallNs());
    if (s.ok()) {
      recorder->targets_.push_back(t);
      AddOnce(t.collector->name(), &recorder->recording_);
    } else if (s.code() == absl::StatusCode::kUnimplemented) {
      AddOnce(t.collector->name(), &recorder->not_recording_);
    } else {
      return s;
    }
  }
  if (!recorder->targets_.empty()) recorder->ScheduleTick();
  return recorder;
}

FlightRecorder::~FlightRecorder() { Stop(); }

void FlightRecorder::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

void FlightRecorder::ScheduleTick() {
  std::weak_ptr<FlightRecorder> weak = weak_from_this();
  executor_->PostAt(executor_->clock().MonoNs() + options_.tick_ms * kNanosPerMilli, [weak] {
    if (std::shared_ptr<FlightRecorder> r = weak.lock()) r->Tick();
  });
}

void FlightRecorder::Tick() {
  PROFCTL_DCHECK_ON_SEQUENCE(*executor_);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    for (const Target& t : targets_) t.collector->RecordUntil(t.clock->WallNs());
  }
  ScheduleTick();
}

RecorderStats FlightRecorder::stats() const {
  RecorderStats total;
  for (const Target& t : targets_) {
    const RecorderStats s = t.collector->recorder_stats();
    total.records += s.records;
    total.bytes += s.bytes;
    total.evicted += s.evicted;
    if (s.since_ns != 0) {
      total.since_ns = total.since_ns == 0 ? s.since_ns : std::min(total.since_ns, s.since_ns);
    }
  }
  return total;
}

}  // namespace profctl::agent
