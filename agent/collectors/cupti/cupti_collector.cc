#include "agent/collectors/cupti/cupti_collector.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/collectors/cupti/record_batch.h"
#include "common/xspace.h"
#include "common/xspace_merge.h"
#include "spdlog/spdlog.h"

namespace profctl::agent::cupti {
namespace {

using tensorflow::profiler::XSpace;

std::string Who(const InjectProcess& p) {
  std::string who = absl::StrCat("cupti pid ", p.pid);
  if (p.rank >= 0) absl::StrAppend(&who, " (rank ", p.rank, ")");
  return who;
}

}  // namespace

void RemapVisibleDevices(absl::string_view visible_devices, RecordBatch* batch) {
  if (visible_devices.empty()) return;
  std::vector<uint32_t> host_index;
  for (absl::string_view item : absl::StrSplit(visible_devices, ',')) {
    item = absl::StripAsciiWhitespace(item);
    uint32_t index = 0;
    if (!absl::SimpleAtoi(item, &index) || item.empty() || item[0] == '-' || item[0] == '+') {
      return;  // UUIDs, MIG names, garbage: keep the ordinals
    }
    host_index.push_back(index);
  }
  auto map = [&host_index](uint32_t* device) {
    if (*device < host_index.size()) *device = host_index[*device];
  };
  for (inject::KernelRecord& r : batch->kernels) map(&r.device_id);
  for (inject::MemcpyRecord& r : batch->memcpys) map(&r.device_id);
  for (inject::MemsetRecord& r : batch->memsets) map(&r.device_id);
  for (inject::MemoryRecord& r : batch->memory) map(&r.device_id);
  for (inject::DeviceRecord& r : batch->devices) map(&r.device_id);
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
  for (InjectWindowResult& r : results) {
    const std::string who = Who(r.process);
    for (const std::string& e : r.errors) space->add_errors(absl::StrCat(who, ": ", e));
    int bad = 0;
    uint64_t dropped = r.dropped_records;
    for (const std::string& bytes : r.batches) {
      absl::StatusOr<RecordBatch> batch = ParseRecordBatch(bytes);
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
      RemapVisibleDevices(r.process.visible_devices, &*batch);
      batches.push_back(*std::move(batch));
    }
    if (bad > 1) space->add_errors(absl::StrCat(who, ": ", bad, " unusable record batches"));
    if (dropped > 0) {
      space->add_warnings(
          absl::StrCat(who, ": ", dropped, " GPU activity records were dropped (buffers full)"));
    }
    if (!r.enabled && r.errors.empty()) {
      space->add_errors(absl::StrCat(who, ": never started recording"));
    }
  }
  if (batches.empty()) return absl::OkStatus();
  CuptiXSpaceOptions build;
  build.hostname = options_.hostname;
  build.profile_start_ns = start_ns_;
  build.profile_stop_ns = stop_ns_ > start_ns_ ? stop_ns_ : start_ns_ + 1;
  build.step_pattern = options_.step_pattern;
  XSpace built;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace(batches, build, &built);
  if (!stats.ok()) return stats.status();
  for (tensorflow::profiler::XPlane& plane : *built.mutable_planes()) {
    if (plane.name() == xspace::kTaskEnvPlaneName) continue;
    xspace::AddOrMergePlane(&plane, space);
  }
  for (const std::string& e : built.errors()) space->add_errors(absl::StrCat("cupti: ", e));
  for (const std::string& w : built.warnings()) space->add_warnings(absl::StrCat("cupti: ", w));
  spdlog::info(
      "cupti: {} processes, {} kernels, {} memcpys, {} API calls, {} NVTX ranges ({} steps), "
      "{} synchronizations ({} without their API call), {} records outside the window",
      results.size(), stats->kernels, stats->memcpys, stats->api_calls, stats->nvtx_ranges,
      stats->steps, stats->synchronizations, stats->unmatched_synchronizations,
      stats->outside_window);
  return absl::OkStatus();
}

}  // namespace profctl::agent::cupti
